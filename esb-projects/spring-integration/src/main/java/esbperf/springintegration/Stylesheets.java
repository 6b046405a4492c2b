package esbperf.springintegration;

import javax.xml.transform.Templates;

import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The shared stylesheets (esb-projects/shared/xslt, packaged under xslt/), compiled by Saxon-HE
 * in the background while the other beans are created: they are a good part of the start-up.
 * The flows take them through lazy references so that nothing waits for them on the way; the
 * application context still waits for all of them before it starts listening (a broken
 * stylesheet stops the start).
 */
@Configuration(proxyBeanMethods = false)
public class Stylesheets {

    @Bean(bootstrap = Bean.Bootstrap.BACKGROUND)
    public Templates buyStocksToReversed() {
        return SafeXml.saxonTemplates("xslt/buystocks-to-reversed.xsl");
    }

    @Bean(bootstrap = Bean.Bootstrap.BACKGROUND)
    public Templates reversedToBuyStocks() {
        return SafeXml.saxonTemplates("xslt/reversed-to-buystocks.xsl");
    }

    @Bean(bootstrap = Bean.Bootstrap.BACKGROUND)
    public Templates jsonToSoap() {
        return SafeXml.saxonTemplates("xslt/json-to-soap.xsl");
    }

    @Bean(bootstrap = Bean.Bootstrap.BACKGROUND)
    public Templates soapToJson() {
        return SafeXml.saxonTemplates("xslt/soap-to-json.xsl");
    }
}
