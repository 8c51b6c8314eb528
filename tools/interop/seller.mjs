// A seller built only with the official TypeScript x402 packages (@x402/express over
// express, @x402/evm's exact scheme, settling through an HTTP facilitator): what an
// outside developer writes. nib's tests buy from it over GET and POST.
//   FACILITATOR_URL, NETWORK (eip155:<id>), USDC, TOKEN_NAME, TOKEN_VERSION, PAY_TO, PRICE
// Prints "listening http://127.0.0.1:<port>" once serving.
import express from "express";
import { paymentMiddleware, x402ResourceServer } from "@x402/express";
import { ExactEvmScheme } from "@x402/evm/exact/server";
import { HTTPFacilitatorClient } from "@x402/core/server";

const env = (name) => {
  const value = process.env[name];
  if (!value) {
    console.error(`missing ${name}; expected it in the environment`);
    process.exit(2);
  }
  return value;
};
const network = env("NETWORK");
const price = {
  amount: env("PRICE"),
  asset: env("USDC"),
  extra: { name: env("TOKEN_NAME"), version: env("TOKEN_VERSION") },
};
const accepts = [{ scheme: "exact", price, network, payTo: env("PAY_TO") }];
const facilitator = new HTTPFacilitatorClient({ url: env("FACILITATOR_URL") });
const server = new x402ResourceServer(facilitator).register(network, new ExactEvmScheme());

const app = express();
app.use(express.json());
app.use(
  paymentMiddleware(
    {
      "GET /tokens": { accepts, description: "Token fact sheet (?symbol=USDC)", mimeType: "application/json" },
      "POST /lookup": { accepts, description: "Token fact sheet; JSON body {symbol}", mimeType: "application/json" },
    },
    server,
  ),
);
const sheet = (symbol) => ({ symbol: String(symbol || "").toUpperCase(), issuer: "Circle", decimals: 6 });
app.get("/tokens", (req, res) => res.json(sheet(req.query.symbol)));
app.post("/lookup", (req, res) => res.json(sheet(req.body && req.body.symbol)));
const listener = app.listen(0, "127.0.0.1", () => {
  console.log(`listening http://127.0.0.1:${listener.address().port}`);
});
