/** Builds the service into .build/<hash of the output>/ (see build-service.mjs) and returns the URL of its main module. */
export function buildService(options?: { buildRoot?: string }): Promise<URL>;
