import type { z } from 'zod';
import { toIso } from '../../schema/common.ts';
import type { chatInterfaceSchema } from '../../schema/chat-interfaces.ts';
import type { ChatInterfaceRecord } from './repository.ts';

/** A chat interface as the API and its webhook events show it: the key only as hasApiKey, the avatar as its URL. */
export function toChatInterface(row: ChatInterfaceRecord) {
  return {
    id: row.id,
    name: row.name,
    slug: row.slug,
    configId: row.config_id,
    endpointUrl: row.endpoint_url,
    endpointType: row.endpoint_type as z.infer<typeof chatInterfaceSchema>['endpointType'],
    hasApiKey: row.endpoint_api_key_enc !== null,
    welcomeMessage: row.welcome_message,
    placeholder: row.placeholder,
    primaryColor: row.primary_color,
    avatarUrl: row.avatar_version > 0 ? `/api/v1/chat-interfaces/${row.id}/avatar?v=${row.avatar_version}` : null,
    public: row.public,
    allowedOrigins: row.allowed_origins,
    createdAt: toIso(row.created_at)!,
    updatedAt: toIso(row.updated_at)!,
  };
}
