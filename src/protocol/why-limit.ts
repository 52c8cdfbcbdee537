/**
 * The most decision records `GET /v1/jobs/{id}/why` answers at once: the route's bound, its OpenAPI description and
 * `fleetwise why --limit` (refused above it by the client, before a request the controller would refuse) say the same.
 */
export const MAX_WHY_DECISIONS = 1000;
