"""A tiny reverse proxy meeting the proxy half of the ESB contract (esb-projects/README.md):
/proxy/echo and /proxy/raw to ws1, /hbr/echo and /hbr/raw to the back end named by X-Route-To;
the back end's status, body, Content-Type and X-Echo-Backend passed back; 400 without a known
X-Route-To, 502 when a back end cannot be reached, 504 when it does not answer in time. HTTP/1.1
keep-alive both ways, one back-end connection per client connection and back end. Standard library only.

    python3 tiny_proxy.py --listen HOST:PORT --routes FILE
"""
import argparse
import http.client
import http.server
import socket
import urllib.parse

ROUTES = {"/proxy/echo": ("ws1", "/echo"), "/proxy/raw": ("ws1", "/raw"),
          "/hbr/echo": (None, "/echo"), "/hbr/raw": (None, "/raw")}
FAULT = ('<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body>'
         "<soapenv:Fault><faultcode>soapenv:Server</faultcode><faultstring>{}</faultstring></soapenv:Fault>"
         "</soapenv:Body></soapenv:Envelope>")


def read_routes(path):
    backends, timeout_ms = {}, 120000
    for line in open(path):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "timeout_ms":
            timeout_ms = int(words[1])
        else:
            backends[words[0]] = urllib.parse.urlsplit(words[1])
    return backends, timeout_ms / 1000.0


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    backends, timeout_s = {}, 120.0

    def log_message(self, *args):
        pass

    def answer(self, status, body, content_type="text/plain; charset=UTF-8", backend=None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if backend:
            self.send_header("X-Echo-Backend", backend)
        self.end_headers()
        self.wfile.write(body)

    def setup(self):
        super().setup()
        self.pool = {}   # this client connection's keep-alive connections, one per back end

    def finish(self):
        super().finish()
        for connection in self.pool.values():
            connection.close()

    def connection_to(self, name):
        if name not in self.pool:
            url = self.backends[name]
            self.pool[name] = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=self.timeout_s)
        return self.pool[name]

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path not in ROUTES:
            return self.answer(404, b"this proxy serves only " + ", ".join(ROUTES).encode())
        name, path = ROUTES[self.path]
        name = name or self.headers.get("X-Route-To")
        if name not in self.backends:
            return self.answer(400, b"X-Route-To must be one of " + ", ".join(self.backends).encode())
        headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "soapaction")}
        for attempt in (1, 2):   # once more only when a kept-alive connection was closed before answering
            connection = self.connection_to(name)
            try:
                connection.request("POST", path, body, headers)
                response = connection.getresponse()
                data = response.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                connection.close()
                if attempt == 2:
                    return self.answer(502, FAULT.format(f"502 {e}").encode(), "text/xml; charset=UTF-8")
            except socket.timeout:
                connection.close()
                return self.answer(504, FAULT.format("504 the back end did not answer in time").encode(),
                                   "text/xml; charset=UTF-8")
            except OSError as e:
                connection.close()
                return self.answer(502, FAULT.format(f"502 {e}").encode(), "text/xml; charset=UTF-8")
        self.answer(response.status, data, response.getheader("Content-Type", "text/xml"),
                    response.getheader("X-Echo-Backend"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", required=True)
    parser.add_argument("--routes", required=True)
    args = parser.parse_args()
    host, _, port = args.listen.rpartition(":")
    host = host.strip("[]")
    Proxy.backends, Proxy.timeout_s = read_routes(args.routes)
    server_class = type("Server", (http.server.ThreadingHTTPServer,),
                        {"address_family": socket.AF_INET6 if ":" in host else socket.AF_INET,
                         "daemon_threads": True, "request_queue_size": 256})
    server = server_class((host, int(port)), Proxy)
    print(f"tiny proxy on {args.listen}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
