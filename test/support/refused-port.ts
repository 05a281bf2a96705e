/**
 * A loopback port every connection to is refused, for as long as a test needs it: port 1
 * (tcpmux), privileged and unused. A port taken from the kernel and given back (listen(0), close)
 * is free for anyone: with many gateways at once, another test's upstream took one and answered
 * 200 where a test expected upstream_unavailable. No test listens on it.
 */
export const REFUSED_PORT = 1;
