package esbperf.springintegration;

import java.io.IOException;
import java.net.URI;
import java.util.List;

import org.apache.hc.client5.http.config.ConnectionConfig;
import org.apache.hc.client5.http.config.RequestConfig;
import org.apache.hc.client5.http.impl.classic.CloseableHttpClient;
import org.apache.hc.client5.http.impl.classic.HttpClients;
import org.apache.hc.client5.http.impl.io.PoolingHttpClientConnectionManager;
import org.apache.hc.client5.http.impl.io.PoolingHttpClientConnectionManagerBuilder;
import org.apache.hc.core5.http.io.SocketConfig;
import org.apache.hc.core5.pool.PoolConcurrencyPolicy;
import org.apache.hc.core5.pool.PoolReusePolicy;
import org.apache.hc.core5.util.TimeValue;
import org.apache.hc.core5.util.Timeout;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.http.HttpMethod;
import org.springframework.http.client.ClientHttpResponse;
import org.springframework.http.client.HttpComponentsClientHttpRequestFactory;
import org.springframework.http.converter.ByteArrayHttpMessageConverter;
import org.springframework.web.client.ResponseErrorHandler;
import org.springframework.web.client.RestTemplate;

/**
 * The HTTP client every outbound gateway shares: Apache HttpClient 5 with one keep-alive
 * connection pool for the three back ends, no retries, no redirects, no cookies, and the
 * back-end timeout as the time to wait for an answer.
 */
@Configuration(proxyBeanMethods = false)
public class BackendClient {

    @Bean(destroyMethod = "close")
    public CloseableHttpClient backendHttpClient(
            @Value("${backend.timeout.ms}") long timeoutMs,
            @Value("${backend.connect-timeout.ms}") long connectTimeoutMs,
            @Value("${backend.pool.max-per-route}") int maxPerRoute,
            @Value("${backend.pool.idle-ms}") long idleMs,
            @Value("${backend.pool.validate-after-inactivity-ms}") long validateAfterMs) {

        Timeout answer = Timeout.ofMilliseconds(timeoutMs);
        Timeout connect = Timeout.ofMilliseconds(Math.min(connectTimeoutMs, timeoutMs));
        PoolingHttpClientConnectionManager pool = PoolingHttpClientConnectionManagerBuilder.create()
                // Per-route locking (three routes) instead of one lock for the whole pool.
                .setPoolConcurrencyPolicy(PoolConcurrencyPolicy.LAX)
                // Reuse the most recently released connection: the others may expire idle.
                .setConnPoolPolicy(PoolReusePolicy.LIFO)
                .setMaxConnPerRoute(maxPerRoute)
                .setMaxConnTotal(3 * maxPerRoute)
                .setDefaultSocketConfig(SocketConfig.custom()
                        .setTcpNoDelay(true)
                        .setSoTimeout(answer)
                        .build())
                .setDefaultConnectionConfig(ConnectionConfig.custom()
                        .setConnectTimeout(connect)
                        .setSocketTimeout(answer)
                        // A connection idle longer than this is checked before reuse (the
                        // back end may have closed it); busy connections are not.
                        .setValidateAfterInactivity(TimeValue.ofMilliseconds(validateAfterMs))
                        .build())
                .build();
        return HttpClients.custom()
                .setConnectionManager(pool)
                .setDefaultRequestConfig(RequestConfig.custom()
                        .setConnectionRequestTimeout(connect)
                        .setResponseTimeout(answer)
                        .build())
                // A retry would hide a failure and skew the timings; a POST is never retried
                // by default, this makes it explicit.
                .disableAutomaticRetries()
                .disableRedirectHandling()
                .disableCookieManagement()
                .disableAuthCaching()
                .disableContentCompression()
                // Close connections idle longer than the back ends keep them (the JDK
                // HttpServer: 30 s), so a reused connection is rarely one they dropped.
                .evictIdleConnections(TimeValue.ofMilliseconds(idleMs))
                .build();
    }

    /** Bodies as byte[] both ways; back-end HTTP errors are answers, not exceptions. */
    @Bean
    public RestTemplate backendRestTemplate(CloseableHttpClient backendHttpClient) {
        RestTemplate template = new RestTemplate(List.of(new ByteArrayHttpMessageConverter()));
        template.setRequestFactory(new HttpComponentsClientHttpRequestFactory(backendHttpClient));
        template.setErrorHandler(new PassThroughErrors());
        return template;
    }

    /** Every status is passed on to the client as the back end sent it. */
    static final class PassThroughErrors implements ResponseErrorHandler {

        @Override
        public boolean hasError(ClientHttpResponse response) {
            return false;
        }

        @Override
        public void handleError(URI url, HttpMethod method, ClientHttpResponse response) throws IOException {
            // never called: hasError is always false
        }
    }
}
