package esbperf.springintegration;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * Spring Integration as the ESB under test (esb-projects/README.md): the flows are in
 * {@link EsbFlows}, the back-end client in {@link BackendClient}, every setting in
 * application.properties (overridden by -D system properties: esb.host, esb.port,
 * backend.ws1..ws3, backend.timeout.ms, backend.connect-timeout.ms).
 */
@SpringBootApplication
public class EsbApplication {

    public static void main(String[] args) {
        SpringApplication.run(EsbApplication.class, args);
    }
}
