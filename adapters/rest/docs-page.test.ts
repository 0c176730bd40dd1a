import { describe, expect, it } from 'vitest';
import { escapeHtml, renderDocsPage, type OpenApiDocumentLike } from './docs-page.ts';

const sample = {
  openapi: '3.1.0',
  info: {
    title: 'Chat Interface API',
    version: '1.2.3',
    description: 'Manage chat interfaces. <script>alert(1)</script>',
  },
  servers: [{ url: 'https://chat.example.com/api/v1', description: 'Production' }],
  tags: [
    { name: 'chat-interfaces', description: 'Widgets visitors chat with' },
    { name: 'api-keys', description: 'Keys for the REST API' },
  ],
  security: [{ bearerAuth: [] }],
  paths: {
    '/chat-interfaces': {
      post: {
        operationId: 'chatInterfaces.create',
        summary: 'Create a chat interface',
        description: 'Creates a widget. <script>alert(1)</script>',
        tags: ['chat-interfaces'],
        requestBody: {
          required: true,
          content: { 'application/json': { schema: { $ref: '#/components/schemas/ChatInterfaceInput' } } },
        },
        responses: {
          '201': {
            description: 'Created',
            content: { 'application/json': { schema: { $ref: '#/components/schemas/ChatInterface' } } },
          },
          '400': { $ref: '#/components/responses/BadRequest' },
        },
      },
    },
    '/chat-interfaces/{chatInterfaceId}': {
      parameters: [{ name: 'chatInterfaceId', in: 'path', required: true, schema: { type: 'string', format: 'uuid' } }],
      get: {
        operationId: 'chatInterfaces.get',
        summary: 'Get a chat interface',
        tags: ['chat-interfaces'],
        parameters: [{ name: 'locale', in: 'query', required: false, schema: { type: 'string', enum: ['en', 'fr'] } }],
        responses: {
          '200': {
            description: 'OK',
            content: { 'application/json': { schema: { $ref: '#/components/schemas/ChatInterface' } } },
          },
          '400': { description: 'Invalid id' },
        },
      },
    },
    '/api-keys': {
      get: {
        operationId: 'apiKeys.list',
        summary: 'List API keys',
        tags: ['api-keys'],
        security: [{ bearerAuth: [] }, { apiKeyHeader: [] }],
        responses: {
          '200': {
            description: 'OK',
            content: { 'application/json': { schema: { type: 'array', items: { $ref: '#/components/schemas/ApiKey' } } } },
          },
        },
      },
    },
    '/health': {
      get: { summary: 'Health check', security: [], responses: { '200': { description: 'Alive' } } },
    },
  },
  components: {
    securitySchemes: {
      bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
      apiKeyHeader: { type: 'apiKey', in: 'header', name: 'x-api-key' },
    },
    responses: {
      BadRequest: { description: 'Validation failed', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
    },
    schemas: {
      ChatInterfaceInput: {
        type: 'object',
        required: ['name'],
        properties: { name: { type: 'string', minLength: 1 }, welcomeMessage: { type: 'string' } },
      },
      ChatInterface: {
        type: 'object',
        properties: { id: { type: 'string', format: 'uuid' }, name: { type: 'string' }, createdAt: { type: 'string', format: 'date-time' } },
      },
      ApiKey: { type: 'object', properties: { id: { type: 'string' }, prefix: { type: 'string' }, active: { type: 'boolean' } } },
      Error: { type: 'object', properties: { code: { type: 'string' }, message: { type: 'string' } } },
    },
  },
} satisfies OpenApiDocumentLike;

const html = renderDocsPage(sample);

describe('renderDocsPage', () => {
  it('returns a complete HTML5 document', () => {
    expect(html.startsWith('<!DOCTYPE html>')).toBe(true);
    expect(html).toContain('<meta charset="utf-8">');
    expect(html).toContain('<title>Chat Interface API</title>');
    expect(html).toContain('Version 1.2.3');
    expect(html.trimEnd().endsWith('</html>')).toBe(true);
  });

  it('documents every path and method', () => {
    for (const path of ['/chat-interfaces', '/chat-interfaces/{chatInterfaceId}', '/api-keys', '/health']) {
      expect(html).toContain(`<code class="path">${path}</code>`);
    }
    expect(html).toContain('<span class="method post">POST</span> <code class="path">/chat-interfaces</code>');
    expect(html).toContain('<span class="method get">GET</span> <code class="path">/chat-interfaces/{chatInterfaceId}</code>');
    expect(html).toContain('Create a chat interface');
  });

  it('groups the index by tag, untagged operations under "default"', () => {
    const nav = html.slice(html.indexOf('<nav'), html.indexOf('</nav>'));
    const positions = ['chat-interfaces', 'api-keys', 'default'].map((tag) => nav.indexOf(`<h2>${tag}</h2>`));
    expect(positions.every((p) => p >= 0)).toBe(true);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    expect(html).toContain('Widgets visitors chat with');
  });

  it('lists parameters, including path-level ones, with location, requiredness and type', () => {
    expect(html).toMatch(/<td><code>chatInterfaceId<\/code><\/td><td>path<\/td><td><strong>yes<\/strong><\/td><td>string <span class="muted">\(uuid\)<\/span><\/td>/);
    expect(html).toMatch(/<td><code>locale<\/code><\/td><td>query<\/td><td>no<\/td><td>&quot;en&quot; \| &quot;fr&quot;<\/td>/);
  });

  it('renders request body and response schemas, with $refs linking to components', () => {
    expect(html).toContain('Request body <span class="muted">(required)</span>');
    expect(html).toContain('<a href="#schema-ChatInterfaceInput">&quot;#/components/schemas/ChatInterfaceInput&quot;</a>');
    expect(html).toContain('<a href="#schema-ApiKey">');
    for (const status of ['200', '201', '400']) expect(html).toContain(`>${status}</span>`);
    // a $ref'd response is resolved from components.responses
    expect(html).toContain('Validation failed');
    expect(html).toContain('<a href="#schema-Error">');
  });

  it('renders the components section with every schema and its property names', () => {
    for (const name of ['ChatInterfaceInput', 'ChatInterface', 'ApiKey', 'Error']) {
      expect(html).toContain(`id="schema-${name}"`);
    }
    for (const property of ['name', 'welcomeMessage', 'createdAt', 'prefix', 'active', 'message']) {
      expect(html).toContain(`<span class="k">&quot;${property}&quot;</span>`);
    }
  });

  it('shows the auth schemes per operation (inherited, overridden, public)', () => {
    expect(html).toContain('<a href="#security-bearerAuth">bearerAuth</a>');
    expect(html).toContain('<a href="#security-apiKeyHeader">apiKeyHeader</a>');
    expect(html).toContain('None (public)');
    expect(html).toContain('id="security-bearerAuth"');
    expect(html).toContain('x-api-key');
  });

  it('escapes strings from the document', () => {
    expect(html).not.toContain('<script>alert(1)</script>');
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    const hostile = renderDocsPage({
      info: { title: '</title><img src=x onerror=alert(1)>' },
      tags: [{ name: '"><b>tag' }],
      paths: { '/x"><svg onload=alert(1)>': { get: { tags: ['"><b>tag'], summary: '<i>hi</i>', responses: {} } } },
      components: { schemas: { 'Bad"><b>': { description: '<script>alert(2)</script>' } } },
    });
    expect(hostile).not.toMatch(/<img|<svg|<b>|<i>|<script>alert/);
    expect(hostile).toContain('&lt;/title&gt;&lt;img src=x onerror=alert(1)&gt;');
    expect(escapeHtml(`<a href="x">'&`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;');
  });

  it('is self-contained: no external stylesheets, scripts, images or fonts', () => {
    expect(html).not.toMatch(/<link\b/i);
    expect(html).not.toMatch(/<script[^>]*\bsrc\s*=/i);
    expect(html).not.toMatch(/\bsrc\s*=\s*["']?(?:https?:)?\/\//i);
    expect(html).not.toMatch(/href\s*=\s*["']?(?:https?:)?\/\//i);
    expect(html).not.toMatch(/@import|url\(/i);
    // the server URL is shown as text only
    expect(html).toContain('<code>https://chat.example.com/api/v1</code>');
    expect(html.replace('https://chat.example.com/api/v1', '')).not.toMatch(/https?:\/\//);
  });

  it('has no dangling in-page links', () => {
    const ids = new Set([...html.matchAll(/\bid="([^"]+)"/g)].map((m) => m[1]));
    const targets = [...html.matchAll(/href="#([^"]+)"/g)].map((m) => m[1]);
    expect(targets.length).toBeGreaterThan(5);
    for (const target of targets) expect(ids.has(target), target).toBe(true);
  });

  it('copes with an empty document', () => {
    const empty = renderDocsPage({});
    expect(empty).toContain('<title>API reference</title>');
    expect(empty).toContain('</html>');
  });
});
