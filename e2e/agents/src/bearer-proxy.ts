// A bearer proxy for the official MCP conformance suite, which has no option for headers: it
// listens on loopback, adds `Authorization: Bearer <IDEMGATE_API_KEY>` and passes every request
// to the gateway (IDEMGATE_URL) otherwise as it came, Host and Origin included, so that the
// gateway judges what the suite sent. It prints "listening <port>" once it listens.
import http from "node:http";

const target = new URL(process.env.IDEMGATE_URL ?? "");
const key = process.env.IDEMGATE_API_KEY ?? "";
if (!target.host || !key) {
  console.error("set IDEMGATE_URL and IDEMGATE_API_KEY");
  process.exit(2);
}

const server = http.createServer((req, res) => {
  const headers = { ...req.headers, authorization: `Bearer ${key}` };
  const upstream = http.request(
    { host: target.hostname, port: target.port, method: req.method, path: req.url, headers },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  upstream.on("error", (err) => {
    res.writeHead(502, { "content-type": "text/plain" });
    res.end(`bearer proxy: ${err.message}`);
  });
  req.pipe(upstream);
});

server.listen(0, "127.0.0.1", () => {
  const addr = server.address();
  if (addr && typeof addr === "object") {
    console.log(`listening ${addr.port}`);
  }
});
