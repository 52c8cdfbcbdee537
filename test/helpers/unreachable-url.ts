/**
 * A controller address nothing answers at, for tests whose client must find no controller there: fetch connects and
 * the host refuses the connection at once (ECONNREFUSED), as for a controller that is not running.
 *
 * Port 2, because the other choices each fail some way. On one of fetch's bad ports (9, say) fetch refuses the
 * request itself, without connecting and with its own message, so a test there exercises that refusal and not a
 * missing controller; and `fleetwise worker` refuses such a --controller at start. A port bound, closed and reused is
 * free only for a moment: the kernel hands it out again to the next listen(0) or outgoing connection of any test file
 * running beside it, and the "unreachable" controller may then answer. Port 2 is below 1024, so only a privileged
 * process may listen on it, and below both the kernel's ephemeral range and the blocks test-ports.ts gives out, so
 * nothing in a test run is handed it; no service in use listens there. A constant, it also serves module-level
 * fixtures and messages a test expects word for word. unreachable-url.test.ts holds it to all this.
 */
export const UNREACHABLE_PORT = 2;

/** `http://127.0.0.1:2`: refused at once, never answered. */
export const UNREACHABLE_URL = `http://127.0.0.1:${UNREACHABLE_PORT}`;
