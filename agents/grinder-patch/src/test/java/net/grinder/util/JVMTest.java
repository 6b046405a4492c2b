package net.grinder.util;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.Test;

class JVMTest {

  @ParameterizedTest(name = "java.version {0} is feature {1}.{2}")
  @CsvSource({
      "1.6.0_45,        6,  0",
      "1.8.0_392,       8,  0",
      "9,               9,  0",
      "9.0.4,           9,  0",
      "11.0.22,        11,  0",
      "17.0.15,        17,  0",
      "21,             21,  0",
      "21.0.5,         21,  0",
      "25,             25,  0",
      "'17.0.15+6-LTS (Eclipse Adoptium Temurin)', 17, 0",
      "25-ea+36-beta,  25,  0",
      "1.8.0_402-b06-vendor, 8, 0",
  })
  void parsesFeatureRelease(String version, int feature, int minor) throws Exception {
    assertArrayEquals(new int[] {feature, minor}, JVM.featureAndMinor(version));
    assertTrue(JVM.isAtLeast(version, 1, 6), version + " must satisfy Grinder's 'at least 1.6'");
  }

  @Test
  void olderThanRequiredIsRefused() throws Exception {
    assertFalse(JVM.isAtLeast("1.5.0_22", 1, 6));
    assertFalse(JVM.isAtLeast("11.0.2", 17, 0));
    assertTrue(JVM.isAtLeast("17.0.15", 17, 0));
    assertTrue(JVM.isAtLeast("25", 17, 0));
    assertFalse(JVM.isAtLeast("17.0.15", 17, 1));
  }

  @Test
  void garbageIsAVersionException() {
    assertThrows(JVM.VersionException.class, () -> JVM.featureAndMinor("unknown"));
    assertThrows(JVM.VersionException.class, () -> JVM.featureAndMinor(""));
    assertThrows(JVM.VersionException.class, () -> JVM.featureAndMinor(null));
  }

  @Test
  void runningJvmPasses() throws Exception {
    assertTrue(JVM.getInstance().isAtLeastVersion(1, 6));
  }
}
