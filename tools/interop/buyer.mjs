// A buyer built only with the official TypeScript x402 client (@x402/fetch with
// @x402/evm's exact scheme and a viem account): pays one x402 resource and prints
// {status, body, payment} as JSON. BUYER_KEY (the buyer's key), URL, METHOD, BODY, and
// the one token it may pay in (USDC on NETWORK, at most MAX_ATOMIC a payment): x402's
// spend controls allow only a network's default assets unless told otherwise.
import { x402Client, wrapFetchWithPayment, x402HTTPClient } from "@x402/fetch";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { privateKeyToAccount } from "viem/accounts";

const account = privateKeyToAccount(process.env.BUYER_KEY);
const client = new x402Client();
client.register("eip155:*", new ExactEvmScheme(account));
client.setSpendControls({
  allowedAssets: [
    { network: process.env.NETWORK, asset: process.env.USDC, maxAmountPerPayment: process.env.MAX_ATOMIC },
  ],
});
const pay = wrapFetchWithPayment(fetch, client);
const method = process.env.METHOD || "GET";
const init = { method };
if (process.env.BODY) {
  init.body = process.env.BODY;
  init.headers = { "content-type": "application/json" };
}
const response = await pay(process.env.URL, init);
const text = await response.text();
let body;
try { body = JSON.parse(text); } catch { body = text; }
let payment = null;
try {
  payment = new x402HTTPClient(client).getPaymentSettleResponse((n) => response.headers.get(n));
} catch (err) {
  payment = { error: String(err) };
}
console.log(JSON.stringify({ status: response.status, body, payment }));
