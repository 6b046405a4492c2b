package esbperf.echo;

import jakarta.jws.WebMethod;
import jakarta.jws.WebParam;
import jakarta.jws.WebResult;
import jakarta.jws.WebService;
import jakarta.jws.soap.SOAPBinding;

/**
 * The thesis echo service, published unchanged on either runtime. Document/literal wrapped
 * with the thesis namespace; the wrapper's children (id, message, WSResponse) are
 * unqualified, which is the JAX-WS default and what the thesis's request envelopes send.
 */
@WebService(targetNamespace = EchoService.NAMESPACE, name = "Echo", serviceName = "EchoService",
            portName = "EchoPort")
@SOAPBinding(style = SOAPBinding.Style.DOCUMENT, use = SOAPBinding.Use.LITERAL,
             parameterStyle = SOAPBinding.ParameterStyle.WRAPPED)
public class EchoService {

    public static final String NAMESPACE = "http://ws.webservice.korsdrag.datanizze.se/";

    private final EchoOptions options;

    public EchoService(EchoOptions options) {
        this.options = options;
    }

    /** Answers "{id} {message} [echoed by {backend}]" so every answer shows who served it. */
    @WebMethod(operationName = "echoMessage")
    @WebResult(name = "WSResponse")
    public String echoMessage(@WebParam(name = "id") int id, @WebParam(name = "message") String message) {
        options.simulateWork();
        return id + " " + message + " [echoed by " + options.backendId() + "]";
    }
}
