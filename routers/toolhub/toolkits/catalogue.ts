/** The toolkits the hub offers, by slug. */
import type { Toolkit } from '../toolkit.ts';
import { googleCalendarToolkit } from './google-calendar.ts';
import { httpToolkit } from './http-tool.ts';
import { hubspotToolkit } from './hubspot.ts';
import { slackToolkit } from './slack.ts';

export const TOOLKITS: readonly Toolkit[] = Object.freeze([slackToolkit, googleCalendarToolkit, hubspotToolkit, httpToolkit]);

const BY_SLUG: ReadonlyMap<string, Toolkit> = new Map(TOOLKITS.map((toolkit) => [toolkit.slug, toolkit]));

export function findToolkit(slug: string): Toolkit | undefined {
  return BY_SLUG.get(slug);
}
