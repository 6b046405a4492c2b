-- wrk script: POST the body in $BENCH_BODY as a SOAP 1.1 request (the thesis echo call).
-- Runs once per wrk thread before its first request, so every request is the same bytes.
local file = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.method = "POST"
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = "text/xml; charset=UTF-8"
wrk.headers["SOAPAction"] = '"echoMessage"'
