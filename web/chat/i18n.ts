/**
 * The page's words, in the visitor's language: the service's translation catalogue for navigator.language
 * (falling back along pt-BR -> pt -> en on the service), with built-in English when it cannot be fetched.
 */
const ENGLISH: Record<string, string> = {
  'chat.placeholder': 'Type your message...',
  'chat.send': 'Send',
  'chat.welcome': 'Hi! How can I help you today?',
  'chat.typing': '{name} is typing...',
  'chat.error.connection': 'Unable to connect. Please check your internet connection.',
  'chat.error.timeout': 'The response took too long. Please try again.',
  'chat.error.invalidResponse': 'We received an unexpected response. Please try again later.',
  'chat.error.rateLimited': "You're sending messages too quickly. Please wait a moment before trying again.",
  'chat.error.generic': 'Something went wrong. Please try again.',
  'chat.sources': 'Sources',
  'chat.newConversation': 'New conversation',
  'chat.close': 'Close chat',
  'chat.notAvailable': 'This chat is not available right now.',
  'chat.messageLabel': 'Your message',
  'chat.you': 'You',
  'chat.assistant': 'Assistant',
  'form.title': 'Leave your details',
  'form.submit': 'Submit',
  'form.thanks': "Thank you, {name}! We'll be in touch soon.",
  'form.required': 'This field is required',
  'form.invalidEmail': 'Please enter a valid email address',
  'booking.pickSlot': 'Choose a time slot',
  'booking.offered': 'Available times',
  'booking.noSlots': 'No time slots available',
  'booking.name': 'Name',
  'booking.email': 'Email',
  'booking.phone': 'Phone',
  'booking.confirm': 'Book this time',
  'booking.taken': 'That time was just taken. Please choose another one.',
  'handoff.open': 'Talk to a person',
  'handoff.title': 'Talk to a person',
  'handoff.name': 'Name',
  'handoff.email': 'Email',
  'handoff.message': 'How can we help?',
  'handoff.submit': 'Send',
  'handoff.cancel': 'Cancel',
  'handoff.sent': 'Thank you! Your reference is {reference}; a person will answer you by e-mail.',
  'common.loading': 'Loading...',
};

export type Translate = (key: string, params?: Record<string, string>) => string;

export function translator(messages: Record<string, string>): Translate {
  return (key, params = {}) => {
    const text = messages[key] || ENGLISH[key] || key;
    return text.replace(/\{(\w+)\}/g, (whole, name: string) => params[name] ?? whole);
  };
}

export async function loadTranslations(language: string): Promise<{ locale: string; t: Translate }> {
  try {
    const response = await fetch(`/api/v1/translations/${encodeURIComponent(language || 'en')}`);
    if (!response.ok) throw new Error(String(response.status));
    const { data } = (await response.json()) as { data: { locale: string; messages: Record<string, string> } };
    return { locale: data.locale, t: translator(data.messages) };
  } catch {
    return { locale: 'en', t: translator({}) };
  }
}

/** The error code of a failed call, in words a visitor understands. */
export function errorKey(code: string): string {
  if (code === 'RATE_LIMITED') return 'chat.error.rateLimited';
  if (code === 'UPSTREAM_TIMEOUT' || code === 'REQUEST_TIMEOUT') return 'chat.error.timeout';
  if (code === 'UPSTREAM_CONNECTION_FAILED' || code === 'NETWORK') return 'chat.error.connection';
  if (code === 'UPSTREAM_INVALID_RESPONSE' || code === 'UPSTREAM_ERROR' || code === 'SERVICE_UNAVAILABLE') return 'chat.error.invalidResponse';
  return 'chat.error.generic';
}
