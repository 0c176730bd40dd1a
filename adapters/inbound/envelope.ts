import type { ServerResponse } from 'node:http';
import type { AppError } from '../../schema/errors.ts';
import { HTTP_STATUS } from './http-status.ts';

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  const payload = JSON.stringify(body);
  res.statusCode = status;
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(payload));
  res.end(payload);
}

export const successBody = (data: unknown, flat: boolean) => (flat ? { success: true, ...(data as object) } : { success: true, data, version: 'v1' });

export const errorBody = (error: AppError) => ({ success: false, error: { message: error.message, code: error.code, details: error.details } });

export function sendError(res: ServerResponse, error: AppError, headers: Record<string, string> = {}) {
  sendJson(res, HTTP_STATUS[error.code], errorBody(error), { ...headers, ...error.headers });
}
