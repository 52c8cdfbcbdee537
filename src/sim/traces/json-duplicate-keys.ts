// Shared with the API's JSON bodies, so it lives in core.
export * from '../../core/json-duplicate-keys.js';
