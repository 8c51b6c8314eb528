"""The x402 buyer: the wire protocol (``protocol``) beside the paid tool that uses it
(``pay_http``)."""
