package esbperf.monitor;

import java.io.IOException;
import java.io.Writer;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The monitor's samples on disk, so that a monitor killed (SIGKILL included) and restarted on
 * the same folder still serves what it sampled before. It is the only store: /samples reads it.
 *
 * <p>The folder holds segment files {@code samples-NNNNNNNNNN.tsv}, numbered in the order they
 * were written. Each is self-contained: a first line {@link #MAGIC}, then
 * {@code K<tab>id<tab>metric<tab>subject...} lines defining the (metric, subject) lists and
 * {@code T<tab>time_ms<tab>id<tab>value...} lines, one per tick, so a tick is stored whole or
 * not at all. A line counts only when it ends with a newline and parses: the tail cut short by
 * a kill (or garbage after a power loss) is never served. A restarted monitor always starts a
 * new segment, so nothing is ever appended behind such a tail.
 *
 * <p>Bounded by size and age: the oldest segments are deleted while the folder holds more than
 * {@code maxBytes}, or when their newest tick is older than {@code maxAgeMs}. A segment is closed
 * after {@link #SEGMENT_TICKS} ticks or {@code maxBytes / 8} bytes, so the bound is met within
 * one segment. Writing is one append of one line per tick (no fsync: see docs/monitoring.md).
 *
 * <p>Written by the sampling thread, read by the HTTP thread; a lock file keeps a second
 * monitor out of the folder.
 */
final class Spool implements AutoCloseable {

  static final String MAGIC = "# esbperf monitor spool 1";
  static final int SEGMENT_TICKS = 600;   // ten minutes at one tick a second
  static final long DEFAULT_MAX_BYTES = 64L << 20;
  static final long DEFAULT_MAX_AGE_MS = 24L * 3600 * 1000;
  static final long MIN_MAX_BYTES = 2048;
  private static final Pattern SEGMENT_NAME = Pattern.compile("samples-(\\d{10})\\.tsv");

  /** The folder is used by another live monitor. */
  static final class InUse extends Exception {
    InUse(String message) {
      super(message);
    }
  }

  /** One segment file and what it holds (only complete, valid tick lines count). */
  private static final class Segment {
    final long number;
    final Path path;
    long bytes;
    int ticks;
    long minMs = Long.MAX_VALUE;
    long maxMs = Long.MIN_VALUE;

    Segment(long number, Path path) {
      this.number = number;
      this.path = path;
    }

    void counted(long timeMs) {
      ticks++;
      minMs = Math.min(minMs, timeMs);
      maxMs = Math.max(maxMs, timeMs);
    }
  }

  /** What /status reports about the spool. */
  record Summary(int ticks, Long oldestMs, Long newestMs, long bytes) {
  }

  private final Path dir;
  private final long maxBytes;
  private final long maxAgeMs;
  private final long segmentBytes;
  private final FileChannel lockFile;
  private final FileLock lock;
  private final ArrayDeque<Segment> segments = new ArrayDeque<>();   // oldest first; guarded by this
  private long totalBytes;                                           // guarded by this
  private long nextNumber;
  private Segment current;            // the segment being written; null until the first tick
  private FileChannel out;
  private final Map<List<Tick.Key>, Integer> keyIds = new HashMap<>();   // of the current segment
  private final StringBuilder line = new StringBuilder(4096);

  private Spool(Path dir, long maxBytes, long maxAgeMs, FileChannel lockFile, FileLock lock) {
    this.dir = dir;
    this.maxBytes = maxBytes;
    this.maxAgeMs = maxAgeMs;
    this.segmentBytes = Math.min(1L << 20, Math.max(1024, maxBytes / 8));
    this.lockFile = lockFile;
    this.lock = lock;
  }

  /** Opens (creating it if needed) the spool in {@code dir}, reads what an earlier monitor left
   * there, and drops what is beyond the bounds. */
  static Spool open(Path dir, long maxBytes, long maxAgeMs, long nowMs) throws IOException, InUse {
    Files.createDirectories(dir);
    final Path lockPath = dir.resolve("lock");
    final FileChannel lockFile = FileChannel.open(lockPath, StandardOpenOption.CREATE, StandardOpenOption.READ,
        StandardOpenOption.WRITE);
    FileLock lock = null;
    try {
      lock = lockFile.tryLock();
    }
    catch (OverlappingFileLockException e) {
      // held by this very JVM: in use just the same
    }
    if (lock == null) {
      final String holder = Files.readString(lockPath, StandardCharsets.UTF_8).trim();
      lockFile.close();
      throw new InUse("the spool folder " + dir + " is in use by another monitor"
          + (holder.isEmpty() ? "" : " (pid " + holder + ")") + "; give each monitor a folder of its own");
    }
    // The kernel releases the lock when the process dies, however it dies; the pid is for the message.
    lockFile.truncate(0);
    lockFile.write(ByteBuffer.wrap((ProcessHandle.current().pid() + "\n").getBytes(StandardCharsets.UTF_8)), 0);

    final Spool spool = new Spool(dir, maxBytes, maxAgeMs, lockFile, lock);
    spool.load();
    spool.trim(nowMs);
    return spool;
  }

  private void load() throws IOException {
    final List<Segment> found = new ArrayList<>();
    try (DirectoryStream<Path> files = Files.newDirectoryStream(dir, "samples-*.tsv")) {
      for (Path path : files) {
        final Matcher m = SEGMENT_NAME.matcher(path.getFileName().toString());
        if (m.matches()) {
          found.add(new Segment(Long.parseLong(m.group(1)), path));
        }
      }
    }
    found.sort((a, b) -> Long.compare(a.number, b.number));
    for (Segment segment : found) {
      final byte[] bytes;
      try {
        bytes = Files.readAllBytes(segment.path);
      }
      catch (NoSuchFileException e) {
        continue;
      }
      segment.bytes = bytes.length;
      scan(bytes, Long.MIN_VALUE, Long.MAX_VALUE, segment, null);
      segments.addLast(segment);
      totalBytes += segment.bytes;
      nextNumber = segment.number + 1;
    }
  }

  /** Stores one tick: one line (and a key line before it when its key list is new to the
   * segment), written with one call and not synced. */
  void append(Tick tick) throws IOException {
    if (current == null || current.bytes >= segmentBytes || current.ticks >= SEGMENT_TICKS) {
      roll();
    }
    line.setLength(0);
    Integer id = keyIds.get(tick.keys());
    if (id == null) {
      id = keyIds.size();
      line.append("K\t").append(id);
      for (Tick.Key key : tick.keys()) {
        line.append('\t').append(key.metric()).append('\t');
        escape(key.subject(), line);
      }
      line.append('\n');
    }
    line.append("T\t").append(tick.timeMs()).append('\t').append(id);
    for (double value : tick.values()) {
      line.append('\t');
      SampleCsv.number(value, line);
    }
    line.append('\n');
    final ByteBuffer buffer = ByteBuffer.wrap(line.toString().getBytes(StandardCharsets.UTF_8));
    final int length = buffer.remaining();
    try {
      while (buffer.hasRemaining()) {
        out.write(buffer);
      }
    }
    catch (IOException e) {
      // Part of the line may be on disk: never append behind it, start a new segment next time.
      closeCurrent();
      throw e;
    }
    keyIds.putIfAbsent(tick.keys(), id);
    synchronized (this) {
      current.bytes += length;
      current.counted(tick.timeMs());
      totalBytes += length;
    }
    trim(tick.timeMs());
  }

  private void roll() throws IOException {
    closeCurrent();
    final long number = nextNumber++;
    final Segment segment = new Segment(number, dir.resolve(String.format("samples-%010d.tsv", number)));
    out = FileChannel.open(segment.path, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE,
        StandardOpenOption.APPEND);
    final byte[] magic = (MAGIC + "\n").getBytes(StandardCharsets.UTF_8);
    out.write(ByteBuffer.wrap(magic));
    keyIds.clear();
    segment.bytes = magic.length;
    synchronized (this) {
      segments.addLast(segment);
      totalBytes += magic.length;
      current = segment;
    }
  }

  private void closeCurrent() {
    if (out != null) {
      try {
        out.close();
      }
      catch (IOException e) {
        // nothing left to do with it
      }
      out = null;
    }
    synchronized (this) {
      current = null;
    }
  }

  /** Deletes the oldest segments while the spool is over its size, or their ticks are too old. */
  private void trim(long nowMs) {
    while (true) {
      final Segment oldest;
      synchronized (this) {
        oldest = segments.peekFirst();
        if (oldest == null || oldest == current
            || totalBytes <= maxBytes && (oldest.ticks > 0 ? oldest.maxMs : Long.MIN_VALUE) >= nowMs - maxAgeMs) {
          return;
        }
      }
      try {
        Files.deleteIfExists(oldest.path);
      }
      catch (IOException e) {
        return;   // (a reader has it open, on some systems): try again on the next tick
      }
      synchronized (this) {
        segments.removeFirst();
        totalBytes -= oldest.bytes;
      }
    }
  }

  synchronized Summary summary() {
    int ticks = 0;
    long oldest = Long.MAX_VALUE;
    long newest = Long.MIN_VALUE;
    for (Segment s : segments) {
      ticks += s.ticks;
      oldest = Math.min(oldest, s.minMs);
      newest = Math.max(newest, s.maxMs);
    }
    return ticks == 0 ? new Summary(0, null, null, totalBytes) : new Summary(ticks, oldest, newest, totalBytes);
  }

  Path dir() {
    return dir;
  }

  long maxBytes() {
    return maxBytes;
  }

  long maxAgeMs() {
    return maxAgeMs;
  }

  /** Writes the CSV ({@link SampleCsv#HEADER} and rows) of the ticks with
   * {@code fromMs <= time < toMs}, in the order they were taken. */
  void between(long fromMs, long toMs, Writer csv) throws IOException {
    final List<Segment> overlapping = new ArrayList<>();
    synchronized (this) {
      for (Segment s : segments) {
        if (s.ticks > 0 && s.minMs < toMs && s.maxMs >= fromMs) {
          overlapping.add(s);
        }
      }
    }
    csv.write(SampleCsv.HEADER);
    for (Segment s : overlapping) {
      final byte[] bytes;
      try {
        bytes = Files.readAllBytes(s.path);
      }
      catch (NoSuchFileException e) {
        continue;   // dropped by the bound since we looked
      }
      scan(bytes, fromMs, toMs, null, csv);
    }
  }

  /**
   * Reads one segment's complete lines: counts its valid ticks into {@code counted}, and/or
   * writes the ticks in [fromMs, toMs) as CSV rows to {@code csv}. An unfinished last line, a
   * file without {@link #MAGIC}, and lines that do not parse are skipped.
   */
  private static void scan(byte[] bytes, long fromMs, long toMs, Segment counted, Writer csv) throws IOException {
    int end = bytes.length;
    while (end > 0 && bytes[end - 1] != '\n') {
      end--;   // the tail after the last newline was cut short
    }
    final String text = new String(bytes, 0, end, StandardCharsets.UTF_8);
    if (!text.startsWith(MAGIC + "\n")) {
      return;
    }
    final Map<Integer, String[]> keys = new HashMap<>();   // id -> metric, subject, metric, subject, ...
    final StringBuilder row = new StringBuilder(128);
    int start = MAGIC.length() + 1;
    while (start < text.length()) {
      final int newline = text.indexOf('\n', start);
      final String l = text.substring(start, newline);
      start = newline + 1;
      if (l.startsWith("K\t")) {
        key(l, keys);
        continue;
      }
      if (!l.startsWith("T\t")) {
        continue;
      }
      final int timeEnd = l.indexOf('\t', 2);
      final long time;
      try {
        time = Long.parseLong(l.substring(2, timeEnd < 0 ? l.length() : timeEnd));
      }
      catch (NumberFormatException e) {
        continue;
      }
      if (timeEnd < 0 || counted == null && (time < fromMs || time >= toMs)) {
        continue;
      }
      final String[] fields = l.substring(timeEnd + 1).split("\t", -1);
      final String[] names;
      try {
        names = keys.get(Integer.parseInt(fields[0]));
      }
      catch (NumberFormatException e) {
        continue;
      }
      if (names == null || names.length != 2 * (fields.length - 1) || !allNumbers(fields)) {
        continue;
      }
      if (counted != null) {
        counted.counted(time);
      }
      if (csv != null && time >= fromMs && time < toMs) {
        final String timeText = Long.toString(time);
        for (int i = 1; i < fields.length; i++) {
          row.setLength(0);
          row.append(timeText).append(',').append(names[2 * (i - 1)]).append(',');
          SampleCsv.field(names[2 * (i - 1) + 1], row);
          row.append(',').append(fields[i]).append('\n');
          csv.append(row);
        }
      }
    }
  }

  private static void key(String l, Map<Integer, String[]> keys) {
    final String[] fields = l.split("\t", -1);
    if (fields.length % 2 != 0) {
      return;   // K, id, then pairs
    }
    try {
      final String[] names = new String[fields.length - 2];
      for (int i = 2; i < fields.length; i++) {
        names[i - 2] = i % 2 == 0 ? fields[i] : unescape(fields[i]);
      }
      keys.put(Integer.parseInt(fields[1]), names);
    }
    catch (NumberFormatException e) {
      // not a key line after all
    }
  }

  /** Values are written by {@link SampleCsv#number}: digits, '.', '-', 'E'. */
  private static boolean allNumbers(String[] fields) {
    for (int i = 1; i < fields.length; i++) {
      final String f = fields[i];
      if (f.isEmpty()) {
        return false;
      }
      for (int c = 0; c < f.length(); c++) {
        final char ch = f.charAt(c);
        if (!(ch >= '0' && ch <= '9' || ch == '.' || ch == '-' || ch == 'E')) {
          return false;
        }
      }
    }
    return true;
  }

  /** Subjects (a --match text) may hold anything: tab, newline and backslash are escaped. */
  static void escape(String text, StringBuilder out) {
    for (int i = 0; i < text.length(); i++) {
      final char c = text.charAt(i);
      switch (c) {
        case '\\' -> out.append("\\\\");
        case '\t' -> out.append("\\t");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        default -> out.append(c);
      }
    }
  }

  static String unescape(String text) {
    if (text.indexOf('\\') < 0) {
      return text;
    }
    final StringBuilder out = new StringBuilder(text.length());
    for (int i = 0; i < text.length(); i++) {
      final char c = text.charAt(i);
      if (c != '\\' || i + 1 == text.length()) {
        out.append(c);
        continue;
      }
      final char next = text.charAt(++i);
      out.append(next == 't' ? '\t' : next == 'n' ? '\n' : next == 'r' ? '\r' : next);
    }
    return out.toString();
  }

  @Override
  public void close() {
    closeCurrent();
    try {
      lock.release();
      lockFile.close();
    }
    catch (IOException e) {
      // the process is ending; the kernel releases the lock anyway
    }
  }
}
