import { z } from 'zod';

/** Resource ids are opaque strings to clients; ours are UUIDs, and a malformed one is simply "not found". */
export const idParam = z.string().min(1).max(100);
export const isUuid = (value: string) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value);
export const timestamp = z.string().meta({ format: 'date-time', example: '2026-01-01T12:00:00.000Z' });
export const toIso = (d: Date | string | null) => (d === null ? null : new Date(d).toISOString());
export const deletedSchema = z.object({ deleted: z.literal(true), id: z.string() });
