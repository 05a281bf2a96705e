/**
 * Plaintext of the demo keys in envoy/modelgate.yaml (published in README.md; demo only).
 * Tests use them as real keys and assert they never reach a log line.
 */
export const DEMO_KEYS = {
  /** group basic, balance 12.5 */
  alice: 'sk-mg-ILDkoIELK720nfwahyG9aGY7GnvM7YZb3y1o3Dui',
  /** group pro, unlimited */
  bob: 'sk-mg-iFUBOfhN3bTaiUrbedWrF5gK9OSMsoaEXY0m8i59',
  /** group basic, balance 0 */
  carol: 'sk-mg-z5oWPKMWqLGxOIBNznHJOu5I4hgpVVG6FH2F2sJB',
  /** group basic, disabled */
  dave: 'sk-mg-gZB3AFrteTLq7TMGqdXDb5TgYGkixjbKye0OqjM0',
  /** group pro, expired 2025-01-01 */
  erin: 'sk-mg-7HouKzNv4nhn6Ax2zQDSIVDsFNgggNfOKk3VRdNv',
  /** group paused (unavailable) */
  frank: 'sk-mg-jJ68KtlGH0KT73cuWnGCwjXMdEiVdMnVFH2Rbb7l',
} as const;
