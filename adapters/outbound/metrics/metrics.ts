import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * The service's Prometheus metrics, one registry per instance (tests run several in a process). Labels are
 * bounded and never carry ids, keys, addresses or user text: route templates, methods, status codes, kinds.
 */
export interface ServiceMetrics {
  registry: Registry;
  observeRequest(labels: { method: string; route: string; status: number }, seconds: number): void;
  observeUpstream(labels: { type: string; outcome: 'ok' | 'error' }, seconds: number): void;
  countWebhookOutcome(outcome: 'delivered' | 'failed'): void;
  /** Read on each scrape (the job queue's depth comes from the database). */
  setCollector(collect: () => Promise<{ jobs: Record<string, number> }>): void;
}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

export function createMetrics(): ServiceMetrics {
  const registry = new Registry();
  let collect: (() => Promise<{ jobs: Record<string, number> }>) | undefined;
  const requests = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from a request to its response, by route template and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const upstream = new Histogram({
    name: 'upstream_request_duration_seconds',
    help: 'Time of a chat turn’s answer from its backend (an external endpoint by connector type, or the knowledge base)',
    labelNames: ['type', 'outcome'] as const,
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [registry],
  });
  const webhooks = new Counter({
    name: 'webhook_delivery_attempts_total',
    help: 'Webhook delivery attempts by outcome',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  new Gauge({
    name: 'job_queue_depth',
    help: 'Background jobs by state (queued, running, dead)',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      if (!collect) return;
      const { jobs } = await collect();
      for (const [state, count] of Object.entries(jobs)) this.set({ state }, count);
    },
  });
  return {
    registry,
    observeRequest: ({ method, route, status }, seconds) =>
      requests.observe({ method: METHODS.has(method) ? method : 'OTHER', route, status: String(status) }, seconds),
    observeUpstream: (labels, seconds) => upstream.observe(labels, seconds),
    countWebhookOutcome: (outcome) => webhooks.inc({ outcome }),
    setCollector: (fn) => {
      collect = fn;
    },
  };
}
