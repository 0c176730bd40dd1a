/**
 * Connection pinning: sockets reach only the address the target check approved, whether opened for one request
 * (the pinned lookup) or kept alive for later ones (one agent per checked target).
 */
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { Target } from './target-check.ts';

// Connection reuse: at most this many per-target agents are kept (LRU).
export const MAX_POOLED_TARGETS = 128;
// Idle pooled sockets per target (at least the webhook workers of an instance); more are closed when released.
const MAX_FREE_SOCKETS_PER_TARGET = 16;
// An idle pooled socket is closed after this long (Node shortens it further
// when the server announces `Keep-Alive: timeout=N`). Kept below the common
// 5 s server default so a reused socket is rarely one the server is closing.
const POOLED_SOCKET_IDLE_MS = 4_000;

/**
 * A `lookup` for http(s).request that ignores the hostname and always answers
 * with the address that was already checked, so the socket cannot be pointed
 * elsewhere by a second DNS resolution.
 */
export function createPinnedLookup(address: string, family: 4 | 6): LookupFunction {
  return (_hostname, options, callback) => {
    // Real lookups answer asynchronously; net relies on that ordering.
    process.nextTick(() => {
      if (options.all) callback(null, [{ address, family }]);
      else callback(null, address, family);
    });
  };
}

/**
 * Keep-alive agents, one per checked target, least recently used evicted
 * first. Every option that decides where and how a socket connects (pinned
 * address, port, TLS servername and verification) is part of the key AND set
 * on the agent itself (agent options override request options when Node
 * creates a socket), so a socket in an agent can only reach that target.
 */
export class AgentPool {
  private readonly agents = new Map<string, http.Agent>();

  constructor(
    private readonly max: number,
    private readonly ca?: string[],
  ) {}

  get(isHttps: boolean, target: Target, port: number, lookup: LookupFunction): http.Agent {
    const key = JSON.stringify([isHttps ? 'https' : 'http', target.address, target.family, port, target.servername ?? null, target.exempt]);
    const existing = this.agents.get(key);
    if (existing !== undefined) {
      // Refresh its LRU position.
      this.agents.delete(key);
      this.agents.set(key, existing);
      return existing;
    }
    const common: http.AgentOptions = {
      keepAlive: true,
      maxFreeSockets: MAX_FREE_SOCKETS_PER_TARGET,
      // Idle timeout: Node destroys a *free* socket when it fires; a socket in
      // use only gets an unobserved 'timeout' event (the Exchange deadline
      // bounds requests). Free sockets are also unref'd, so idle pooled
      // connections never keep the process alive.
      timeout: POOLED_SOCKET_IDLE_MS,
      lookup,
    };
    let agent: http.Agent;
    if (isHttps) {
      const tlsOptions: https.AgentOptions = { ...common, rejectUnauthorized: true, ...(this.ca ? { ca: this.ca } : {}) };
      if (target.servername !== undefined) tlsOptions.servername = target.servername;
      agent = new https.Agent(tlsOptions);
    } else {
      agent = new http.Agent(common);
    }
    this.agents.set(key, agent);
    if (this.agents.size > this.max) {
      const oldest = this.agents.keys().next().value;
      if (oldest !== undefined) {
        const evicted = this.agents.get(oldest);
        this.agents.delete(oldest);
        if (evicted !== undefined) retire(evicted);
      }
    }
    return agent;
  }
}

/**
 * Closes an evicted agent's idle sockets and stops it pooling the rest;
 * requests still running on it (e.g. a long SSE stream) are left to finish,
 * their sockets are then closed instead of kept.
 */
function retire(agent: http.Agent): void {
  agent.keepSocketAlive = () => false;
  for (const sockets of Object.values(agent.freeSockets)) {
    for (const socket of sockets ?? []) socket.destroy();
  }
}
