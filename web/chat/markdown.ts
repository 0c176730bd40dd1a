import MarkdownIt from 'markdown-it';

/**
 * Replies are Markdown from a model or an owner's endpoint: rendered with raw HTML escaped (html: false) and
 * markdown-it's link check, which refuses javascript:, vbscript:, file: and data: URLs; links open in a new tab
 * without giving it this page. The output is therefore safe to put into the DOM as HTML.
 */
const markdown = new MarkdownIt({ html: false, linkify: true, breaks: true });
// Only real URLs become links: a file name such as tent-care.md is not a Moldovan domain.
markdown.linkify.set({ fuzzyLink: false, fuzzyEmail: false });

const defaultLinkOpen = markdown.renderer.rules.link_open ?? ((tokens, index, options, _env, self) => self.renderToken(tokens, index, options));
markdown.renderer.rules.link_open = (tokens, index, options, env, self) => {
  const token = tokens[index];
  if (token) {
    token.attrSet('target', '_blank');
    token.attrSet('rel', 'noopener noreferrer nofollow');
  }
  return defaultLinkOpen(tokens, index, options, env, self);
};

export const renderMarkdown = (text: string): string => markdown.render(text);
