/**
 * Human-readable API reference rendered from our OpenAPI 3.1 document.
 *
 * The output is one self-contained HTML5 page: inline CSS, no external assets,
 * and a tiny optional inline script for filtering (the page is fully usable
 * without it), so it works on self-hosted, offline deployments. Every string
 * taken from the document is HTML-escaped.
 */

/** JSON Schema as found in the document: an object (possibly just `{ $ref }`) or a boolean schema. */
export type JsonSchemaLike = object | boolean;

export interface ReferenceLike {
  readonly $ref?: string;
}

export interface ParameterLike extends ReferenceLike {
  readonly name?: string;
  readonly in?: string;
  readonly required?: boolean;
  readonly deprecated?: boolean;
  readonly description?: string;
  readonly schema?: JsonSchemaLike;
}

export interface MediaTypeLike {
  readonly schema?: JsonSchemaLike;
}

export interface RequestBodyLike extends ReferenceLike {
  readonly description?: string;
  readonly required?: boolean;
  readonly content?: { readonly [mediaType: string]: MediaTypeLike };
}

export interface ResponseLike extends ReferenceLike {
  readonly description?: string;
  readonly content?: { readonly [mediaType: string]: MediaTypeLike };
}

export type SecurityRequirementLike = { readonly [scheme: string]: readonly string[] | undefined };

export interface OperationLike {
  readonly operationId?: string;
  readonly summary?: string;
  readonly description?: string;
  readonly tags?: readonly string[];
  readonly deprecated?: boolean;
  readonly parameters?: readonly ParameterLike[];
  readonly requestBody?: RequestBodyLike;
  readonly responses?: { readonly [status: string]: ResponseLike };
  readonly security?: readonly SecurityRequirementLike[];
}

export interface PathItemLike {
  readonly summary?: string;
  readonly description?: string;
  readonly parameters?: readonly ParameterLike[];
  readonly get?: OperationLike;
  readonly put?: OperationLike;
  readonly post?: OperationLike;
  readonly delete?: OperationLike;
  readonly options?: OperationLike;
  readonly head?: OperationLike;
  readonly patch?: OperationLike;
  readonly trace?: OperationLike;
}

export interface SecuritySchemeLike extends ReferenceLike {
  readonly type?: string;
  readonly description?: string;
  readonly name?: string;
  readonly in?: string;
  readonly scheme?: string;
  readonly bearerFormat?: string;
}

export interface OpenApiDocumentLike {
  readonly openapi?: string;
  readonly info?: { readonly title?: string; readonly version?: string; readonly description?: string };
  readonly servers?: readonly { readonly url?: string; readonly description?: string }[];
  readonly tags?: readonly { readonly name?: string; readonly description?: string }[];
  readonly paths?: { readonly [path: string]: PathItemLike | undefined };
  readonly components?: {
    readonly schemas?: { readonly [name: string]: JsonSchemaLike };
    readonly parameters?: { readonly [name: string]: ParameterLike };
    readonly requestBodies?: { readonly [name: string]: RequestBodyLike };
    readonly responses?: { readonly [name: string]: ResponseLike };
    readonly securitySchemes?: { readonly [name: string]: SecuritySchemeLike };
  };
  readonly security?: readonly SecurityRequirementLike[];
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'head', 'options', 'trace'] as const;
type Method = (typeof METHODS)[number];

interface Op {
  readonly method: Method;
  readonly path: string;
  readonly op: OperationLike;
  readonly item: PathItemLike;
  readonly tags: readonly string[];
  readonly id: string;
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for HTML element content and double-quoted attribute values. */
export function escapeHtml(value: unknown): string {
  return String(value ?? '').replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/** Deterministic, injective fragment id (refs must link to the same id they were declared with). */
function anchor(prefix: string, text: string): string {
  return `${prefix}-${text.replace(/[^A-Za-z0-9_-]/g, (c) => `~${c.codePointAt(0)!.toString(16)}~`)}`;
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const text = (value: unknown): string => (typeof value === 'string' ? value : '');

/** Resolves `#/components/<kind>/<name>` one level (enough for generated documents). */
function deref<T extends ReferenceLike>(doc: OpenApiDocumentLike, value: T | undefined, kind: 'parameters' | 'requestBodies' | 'responses'): T | undefined {
  const ref = value?.$ref;
  if (typeof ref !== 'string') return value;
  const prefix = `#/components/${kind}/`;
  if (!ref.startsWith(prefix)) return value;
  const target = (doc.components?.[kind] as Record<string, unknown> | undefined)?.[pointerDecode(ref.slice(prefix.length))];
  return (target as T | undefined) ?? value;
}

const pointerDecode = (segment: string): string => segment.replace(/~1/g, '/').replace(/~0/g, '~');

function refLink(ref: string, label: string): string {
  const prefix = '#/components/schemas/';
  if (!ref.startsWith(prefix)) return escapeHtml(label);
  return `<a href="#${escapeHtml(anchor('schema', pointerDecode(ref.slice(prefix.length))))}">${escapeHtml(label)}</a>`;
}

/** Pretty-printed JSON as HTML, with `$ref` values turned into links to the components section. */
function renderJson(value: unknown, indent = '', key?: string, seen: ReadonlySet<object> = new Set()): string {
  if (typeof value === 'string') return key === '$ref' ? refLink(value, JSON.stringify(value)) : `<span class="s">${escapeHtml(JSON.stringify(value))}</span>`;
  if (value === null || typeof value !== 'object') return `<span class="l">${escapeHtml(JSON.stringify(value) ?? 'null')}</span>`;
  if (seen.has(value) || indent.length > 80) return '<span class="l">"[circular]"</span>';
  const inner = `${indent}  `;
  const next = new Set(seen).add(value);
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    return `[\n${value.map((item) => inner + renderJson(item, inner, undefined, next)).join(',\n')}\n${indent}]`;
  }
  const entries = Object.entries(value);
  if (entries.length === 0) return '{}';
  const body = entries.map(([k, v]) => `${inner}<span class="k">${escapeHtml(JSON.stringify(k))}</span>: ${renderJson(v, inner, k, next)}`);
  return `{\n${body.join(',\n')}\n${indent}}`;
}

/** One-line type label for tables: `string (uuid)`, `array<Foo>`, `"a" | "b"`. */
function typeLabel(schema: unknown, depth = 0): string {
  if (!isRecord(schema) || depth > 4) return schema === false ? 'never' : 'any';
  if (typeof schema.$ref === 'string') return refLink(schema.$ref, schema.$ref.split('/').pop() ?? schema.$ref);
  if (Array.isArray(schema.enum)) return schema.enum.map((v) => escapeHtml(JSON.stringify(v))).join(' | ');
  if ('const' in schema) return escapeHtml(JSON.stringify(schema.const));
  for (const [combiner, sep] of [['oneOf', ' | '], ['anyOf', ' | '], ['allOf', ' &amp; ']] as const) {
    const parts = schema[combiner];
    if (Array.isArray(parts) && parts.length > 0) return parts.map((s) => typeLabel(s, depth + 1)).join(sep);
  }
  const types = Array.isArray(schema.type) ? schema.type.map(String) : typeof schema.type === 'string' ? [schema.type] : [];
  if (types.length === 0) return isRecord(schema.properties) ? 'object' : 'any';
  return types
    .map((t) => (t === 'array' && schema.items !== undefined ? `array&lt;${typeLabel(schema.items, depth + 1)}&gt;` : escapeHtml(t)))
    .join(' | ') + (typeof schema.format === 'string' ? ` <span class="muted">(${escapeHtml(schema.format)})</span>` : '');
}

const desc = (value: unknown): string => (text(value) ? `<div class="desc">${escapeHtml(value)}</div>` : '');

function collectOperations(doc: OpenApiDocumentLike): Op[] {
  const ops: Op[] = [];
  const used = new Set<string>();
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    if (!isRecord(item)) continue;
    for (const method of METHODS) {
      const op = item[method];
      if (!isRecord(op)) continue;
      const tags = Array.isArray(op.tags) && op.tags.length > 0 ? op.tags.map(String) : ['default'];
      let id = `op-${`${method}-${path}`.replace(/[^A-Za-z0-9_]+/g, '-').replace(/^-+|-+$/g, '')}`;
      while (used.has(id)) id += '_';
      used.add(id);
      ops.push({ method, path, op, item, tags, id });
    }
  }
  return ops;
}

function groupByTag(doc: OpenApiDocumentLike, ops: readonly Op[], allTags: boolean): Map<string, Op[]> {
  const groups = new Map<string, Op[]>();
  for (const tag of doc.tags ?? []) if (typeof tag.name === 'string') groups.set(tag.name, []);
  for (const op of ops) {
    for (const tag of allTags ? op.tags : op.tags.slice(0, 1)) {
      const list = groups.get(tag) ?? [];
      list.push(op);
      groups.set(tag, list);
    }
  }
  for (const [tag, list] of groups) if (list.length === 0) groups.delete(tag);
  return groups;
}

function renderSecurity(doc: OpenApiDocumentLike, requirements: readonly SecurityRequirementLike[] | undefined): string {
  if (!requirements || requirements.length === 0) return '<span class="muted">None (public)</span>';
  const alternatives = requirements.map((requirement) => {
    const schemes = Object.entries(requirement);
    if (schemes.length === 0) return '<span class="muted">none (optional)</span>';
    return schemes
      .map(([name, scopes]) => {
        const label = doc.components?.securitySchemes?.[name] ? `<a href="#${escapeHtml(anchor('security', name))}">${escapeHtml(name)}</a>` : escapeHtml(name);
        return `<code>${label}</code>${Array.isArray(scopes) && scopes.length > 0 ? ` <span class="muted">(${scopes.map(escapeHtml).join(', ')})</span>` : ''}`;
      })
      .join(' + ');
  });
  return alternatives.join(' <span class="muted">or</span> ');
}

function renderParameters(doc: OpenApiDocumentLike, { op, item }: Op): string {
  const merged = new Map<string, ParameterLike>();
  for (const raw of [...(item.parameters ?? []), ...(op.parameters ?? [])]) {
    const param = deref(doc, raw, 'parameters');
    if (param) merged.set(`${text(param.in)}:${text(param.name)}`, param);
  }
  if (merged.size === 0) return '';
  const rows = [...merged.values()].map(
    (p) =>
      `<tr><td><code>${escapeHtml(p.name)}</code>${p.deprecated ? ' <span class="tag warn">deprecated</span>' : ''}</td><td>${escapeHtml(p.in)}</td>` +
      `<td>${p.required ? '<strong>yes</strong>' : 'no'}</td><td>${typeLabel(p.schema)}</td><td>${escapeHtml(p.description)}</td></tr>`,
  );
  return `<h4>Parameters</h4><table><thead><tr><th>Name</th><th>In</th><th>Required</th><th>Type</th><th>Description</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function renderContent(content: RequestBodyLike['content']): string {
  return Object.entries(content ?? {})
    .map(([mediaType, media]) => `<div class="media">${escapeHtml(mediaType)}</div><pre>${renderJson(media?.schema ?? {})}</pre>`)
    .join('');
}

const statusOrder = (code: string): string => (code === 'default' ? '9zz' : code.toUpperCase());

function renderResponses(doc: OpenApiDocumentLike, op: OperationLike): string {
  const entries = Object.entries(op.responses ?? {}).sort(([a], [b]) => statusOrder(a).localeCompare(statusOrder(b)));
  if (entries.length === 0) return '';
  const blocks = entries.map(([status, raw]) => {
    const response = deref(doc, raw, 'responses');
    const kind = /^[23]/.test(status) ? 'ok' : /^[45]/.test(status) ? 'err' : 'other';
    return `<div class="response"><span class="status ${kind}">${escapeHtml(status)}</span> ${escapeHtml(response?.description)}${renderContent(response?.content)}</div>`;
  });
  return `<h4>Responses</h4>${blocks.join('')}`;
}

function renderOperation(doc: OpenApiDocumentLike, entry: Op): string {
  const { op, method, path } = entry;
  const body = deref(doc, op.requestBody, 'requestBodies');
  const search = [method, path, op.summary, op.operationId, ...entry.tags].map(text).join(' ').toLowerCase();
  return `<section class="op" id="${escapeHtml(entry.id)}" data-search="${escapeHtml(search)}">
<h3><span class="method ${method}">${method.toUpperCase()}</span> <code class="path">${escapeHtml(path)}</code>${op.deprecated ? ' <span class="tag warn">deprecated</span>' : ''}</h3>
${text(op.summary) ? `<p class="summary">${escapeHtml(op.summary)}</p>` : ''}${desc(op.description ?? entry.item.description)}
<dl class="meta">${text(op.operationId) ? `<dt>Operation</dt><dd><code>${escapeHtml(op.operationId)}</code></dd>` : ''}<dt>Auth</dt><dd>${renderSecurity(doc, op.security ?? doc.security)}</dd></dl>
${renderParameters(doc, entry)}
${body ? `<h4>Request body${body.required ? ' <span class="muted">(required)</span>' : ''}</h4>${desc(body.description)}${renderContent(body.content)}` : ''}
${renderResponses(doc, op)}
</section>`;
}

function renderSecuritySchemes(doc: OpenApiDocumentLike): string {
  const schemes = Object.entries(doc.components?.securitySchemes ?? {});
  if (schemes.length === 0) return '';
  const rows = schemes.map(([name, s]) => {
    const details = [s.type, s.scheme, s.bearerFormat && `format: ${s.bearerFormat}`, s.in && s.name && `${s.in}: ${s.name}`].filter((d) => typeof d === 'string' && d);
    return `<tr id="${escapeHtml(anchor('security', name))}"><td><code>${escapeHtml(name)}</code></td><td>${details.map(escapeHtml).join(' · ')}</td><td>${escapeHtml(s.description)}</td></tr>`;
  });
  return `<section><h2 id="security">Authentication</h2><table><thead><tr><th>Scheme</th><th>Type</th><th>Description</th></tr></thead><tbody>${rows.join('')}</tbody></table></section>`;
}

function renderSchemas(doc: OpenApiDocumentLike): string {
  const schemas = Object.entries(doc.components?.schemas ?? {});
  if (schemas.length === 0) return '';
  const blocks = schemas.map(([name, schema]) => {
    const description = isRecord(schema) ? desc(schema.description) : '';
    return `<section class="schema" id="${escapeHtml(anchor('schema', name))}"><h3>${escapeHtml(name)}</h3>${description}<pre>${renderJson(schema)}</pre></section>`;
  });
  return `<section><h2 id="schemas">Schemas</h2>${blocks.join('\n')}</section>`;
}

const STYLE = `
:root{color-scheme:light dark;--bg:#fff;--fg:#1d2330;--muted:#667085;--line:#e4e7ec;--code:#f5f7fa;--accent:#3659e3}
@media (prefers-color-scheme:dark){:root{--bg:#12151c;--fg:#e6e8ee;--muted:#98a2b3;--line:#2a2f3a;--code:#1b1f29;--accent:#8ea6ff}}
*{box-sizing:border-box}body{margin:0;font:15px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:var(--bg);color:var(--fg)}
.layout{display:grid;grid-template-columns:290px 1fr;min-height:100vh}
nav{border-right:1px solid var(--line);padding:1rem;position:sticky;top:0;height:100vh;overflow:auto;font-size:14px}
nav ul{list-style:none;margin:0 0 1rem;padding:0}nav li{margin:.15rem 0;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
nav h2{font-size:12px;text-transform:uppercase;letter-spacing:.06em;color:var(--muted);margin:1rem 0 .3rem}
main{padding:1.5rem 2.5rem;max-width:1100px}a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
h1{margin:0 0 .2rem}h2{border-bottom:1px solid var(--line);padding-bottom:.3rem;margin-top:2.5rem}h4{margin:1.2rem 0 .4rem}
.op,.schema{border:1px solid var(--line);border-radius:8px;padding:1rem 1.25rem;margin:1rem 0}
.op h3{margin:0;font-size:17px;word-break:break-all}.summary{font-weight:600;margin:.5rem 0 0}.desc{white-space:pre-line;margin:.4rem 0}
.muted{color:var(--muted);font-weight:normal}code,pre{font:13px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:var(--code);border-radius:6px;padding:.75rem 1rem;overflow:auto;margin:.3rem 0 .8rem}
table{border-collapse:collapse;width:100%;font-size:14px}th,td{text-align:left;padding:.35rem .6rem;border-bottom:1px solid var(--line);vertical-align:top}
.method{display:inline-block;min-width:4.2em;text-align:center;border-radius:4px;padding:.05rem .4rem;font:700 12px/1.6 ui-monospace,monospace;color:#fff;background:#667085}
.get{background:#1f7ae0}.post{background:#1a9c5b}.put{background:#c77c02}.patch{background:#8a4fd8}.delete{background:#d0393e}
.status{font:700 13px ui-monospace,monospace;padding:0 .35rem;border-radius:4px}.status.ok{color:#1a9c5b}.status.err{color:#d0393e}
.tag{font-size:11px;border-radius:3px;padding:0 .3rem;border:1px solid}.warn{color:#c77c02}.media{font-size:12px;color:var(--muted);margin-top:.4rem}
.meta{display:grid;grid-template-columns:max-content 1fr;gap:.1rem .8rem;margin:.6rem 0 0}.meta dt{color:var(--muted)}.meta dd{margin:0}
.s{color:#1a8754}.l{color:#b35c00}.k{color:var(--fg)}#filter{width:100%;padding:.4rem;margin-bottom:.5rem}
@media (max-width:800px){.layout{display:block}nav{position:static;height:auto;border-right:0;border-bottom:1px solid var(--line)}main{padding:1rem}}
`;

/** Static, document-independent filter: hides operations (and their index entries) not matching the query. */
const SCRIPT = `(function(){var f=document.getElementById('filter');if(!f)return;f.hidden=false;f.addEventListener('input',function(){var q=f.value.trim().toLowerCase();
document.querySelectorAll('[data-search]').forEach(function(el){el.hidden=q!==''&&el.getAttribute('data-search').indexOf(q)===-1;});});})();`;

export function renderDocsPage(openapi: OpenApiDocumentLike): string {
  const doc = openapi;
  const title = text(doc.info?.title) || 'API reference';
  const ops = collectOperations(doc);
  const index = [...groupByTag(doc, ops, true)].map(
    ([tag, list]) =>
      `<h2>${escapeHtml(tag)}</h2><ul>${list
        .map((o) => `<li data-search="${escapeHtml([o.method, o.path, o.op.summary, o.op.operationId, ...o.tags].map(text).join(' ').toLowerCase())}"><a href="#${escapeHtml(o.id)}"><span class="method ${o.method}">${o.method.toUpperCase()}</span> ${escapeHtml(o.path)}</a></li>`)
        .join('')}</ul>`,
  );
  const tagDescriptions = new Map((doc.tags ?? []).map((t) => [text(t.name), text(t.description)]));
  const sections = [...groupByTag(doc, ops, false)].map(
    ([tag, list]) => `<section><h2 id="${escapeHtml(anchor('tag', tag))}">${escapeHtml(tag)}</h2>${desc(tagDescriptions.get(tag))}${list.map((o) => renderOperation(doc, o)).join('\n')}</section>`,
  );
  const servers = (doc.servers ?? []).filter((s) => text(s.url));
  const hasSchemas = Object.keys(doc.components?.schemas ?? {}).length > 0;
  const hasSecurity = Object.keys(doc.components?.securitySchemes ?? {}).length > 0;
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<div class="layout">
<nav aria-label="Operations">
<input id="filter" type="search" placeholder="Filter operations" aria-label="Filter operations" hidden>
${index.join('\n')}
${hasSecurity || hasSchemas ? `<h2>Reference</h2><ul>${hasSecurity ? '<li><a href="#security">Authentication</a></li>' : ''}${hasSchemas ? '<li><a href="#schemas">Schemas</a></li>' : ''}</ul>` : ''}
</nav>
<main>
<header>
<h1>${escapeHtml(title)}</h1>
<p class="muted">${text(doc.info?.version) ? `Version ${escapeHtml(doc.info?.version)}` : ''}${text(doc.openapi) ? ` · OpenAPI ${escapeHtml(doc.openapi)}` : ''}</p>
${desc(doc.info?.description)}
${servers.length > 0 ? `<dl class="meta">${servers.map((s) => `<dt>Server</dt><dd><code>${escapeHtml(s.url)}</code> ${escapeHtml(s.description)}</dd>`).join('')}</dl>` : ''}
</header>
${sections.join('\n')}
${renderSecuritySchemes(doc)}
${renderSchemas(doc)}
</main>
</div>
<script>${SCRIPT}</script>
</body>
</html>
`;
}
