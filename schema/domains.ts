import { z } from 'zod';
import { idParam, queryInt, timestamp } from './common.ts';

export const domainStatusSchema = z.enum(['pending_verification', 'verified', 'active', 'inactive']);

const dnsRecordSchema = z.object({
  type: z.enum(['TXT', 'CNAME', 'A', 'AAAA']),
  name: z.string(),
  value: z.string(),
  purpose: z.enum(['ownership', 'routing']),
});

const observedSchema = z.object({
  status: z.enum(['ok', 'missing', 'mismatch', 'error', 'not_required']).meta({
    description: 'ok: as expected; missing: DNS says there is none; mismatch: present but different; error: DNS could not be asked',
  }),
  found: z.array(z.string()),
  reason: z.string().nullable().meta({ description: 'The resolver error when status is error' }),
});

export const dnsReportSchema = z
  .object({
    checkedAt: timestamp,
    ownership: observedSchema.meta({ description: 'The TXT record at _svc-challenge.<hostname>' }),
    routing: observedSchema.meta({ description: 'CNAME to DOMAIN_CNAME_TARGET, or A/AAAA to DOMAIN_ADDRESSES' }),
    cname: z.array(z.string()),
    a: z.array(z.string()),
    aaaa: z.array(z.string()),
    caa: z.array(z.object({ tag: z.string(), value: z.string() })),
  })
  .meta({ id: 'DnsReport' });

export const domainSchema = z
  .object({
    id: z.string(),
    hostname: z.string().meta({ description: 'Lower-cased, IDNA as punycode' }),
    chatInterfaceId: z.string().nullable(),
    status: domainStatusSchema,
    statusReason: z.string().nullable().meta({ description: 'Why the domain is not further along' }),
    records: z.array(dnsRecordSchema).meta({ description: 'The DNS records to create' }),
    verifiedAt: timestamp.nullable(),
    activatedAt: timestamp.nullable(),
    lastDns: dnsReportSchema.nullable().meta({ description: 'What DNS showed at the last verify or sync' }),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'Domain' });

export const hostnameField = z.string().trim().min(1).max(300);
export const createDomainInput = z.object({ hostname: hostnameField, chatInterfaceId: idParam });
export const updateDomainInput = z.object({ id: idParam, chatInterfaceId: idParam });
export const domainQueryInput = z.object({ domain: hostnameField });

export const reservedCheckSchema = z.object({
  domain: z.string(),
  available: z.boolean(),
  reason: z.enum(['invalid', 'ip_address', 'localhost', 'public_suffix', 'reserved', 'claimed']).nullable(),
});

export const publicRouteSchema = z.object({
  domain: z.string(),
  chatInterface: z.object({ slug: z.string(), name: z.string() }),
  pageUrl: z.string().meta({ description: 'The hosted chat page at this domain' }),
});

export const routingEntrySchema = z.object({
  hostname: z.string(),
  status: domainStatusSchema,
  chatInterfaceId: z.string().nullable(),
  chatInterfaceSlug: z.string().nullable(),
  serving: z.boolean().meta({ description: 'Requests to this hostname get the interface now' }),
});

export const domainEventSchema = z.object({ id: z.string(), hostname: z.string(), chatInterfaceId: z.string().nullable(), status: domainStatusSchema });
export const certificateFailedEventSchema = domainEventSchema.extend({ reason: z.string() });

export const sslStatusSchema = z.object({
  hostname: z.string(),
  mode: z.enum(['acme', 'proxy', 'off']).meta({
    description:
      'acme: the service obtains and serves certificates itself; proxy: a proxy in front terminates TLS and this reports what it serves, read now with a TLS handshake; off: neither (TLS_MODE)',
  }),
  status: z.enum(['none', 'pending', 'issued', 'renewing', 'failed']).meta({
    description:
      'proxy mode: issued when the certificate served is trusted, covers the hostname and is within its dates; failed when it is not; pending when none could be read yet',
  }),
  reason: z.string().nullable(),
  issuer: z.string().nullable(),
  notBefore: timestamp.nullable(),
  notAfter: timestamp.nullable(),
  serialNumber: z.string().nullable().meta({ description: 'Hexadecimal, upper case' }),
  fingerprintSha256: z.string().nullable().meta({ description: 'SHA-256 of the DER certificate, colon-separated hexadecimal' }),
  renewsAt: timestamp.nullable().meta({ description: 'acme mode: when the renewal job runs' }),
  checkedAt: timestamp.nullable().meta({ description: 'proxy mode: when the served certificate was read' }),
});

export const adminDomainsInput = z.object({
  status: domainStatusSchema.optional(),
  limit: queryInt({ min: 1, max: 200 }).default(50),
  offset: queryInt({ min: 0, max: 1_000_000_000 }).default(0),
});

export const recheckQueuedSchema = z.object({
  queued: z.number().int().meta({ description: 'Domains queued for a re-check; results appear in each domain’s lastDns and status' }),
  domains: z.array(z.object({ id: z.string(), hostname: z.string(), status: domainStatusSchema, dnsCheckedAt: timestamp.nullable() })),
});

export const bulkRecheckSchema = z.object({
  queued: z.number().int(),
  scope: z.enum(['pending', 'verified', 'all']).meta({ description: 'Which domains were queued' }),
});

export const redirectFixSchema = z.object({
  fixed: z.array(z.object({ id: z.string(), hostname: z.string(), ownerId: z.string(), reason: z.string() })),
});
