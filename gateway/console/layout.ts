/**
 * The console's page frame: head (styles, scripts from `/ui/assets`, htmx settings), navigation,
 * and the Content-Security-Policy every console answer carries: scripts and styles only from the
 * gateway itself, no inline script or style, no frames, forms only to the gateway.
 */
import type { CspDirectives } from '../http/security-headers.ts';
import { html, type Html } from './html.ts';

/** Where the console is mounted. */
export const CONSOLE_PATH = '/ui';

/** The console's Content-Security-Policy directives (no inline script: page code is `static/console.js`). */
export const CONSOLE_CSP: CspDirectives = {
  'default-src': ["'none'"],
  'script-src': ["'self'"],
  'style-src': ["'self'"],
  'img-src': ["'self'", 'data:'],
  'connect-src': ["'self'"],
  'form-action': ["'self'"],
  'base-uri': ["'none'"],
  'frame-ancestors': ["'none'"],
};

/**
 * htmx settings: no indicator styles injected (they would be an inline style), no `eval`, and
 * 4xx/5xx answers swapped like others so an error the server rendered is shown where it belongs.
 */
const HTMX_CONFIG = JSON.stringify({
  includeIndicatorStyles: false,
  allowEval: false,
  allowScriptTags: false,
  selfRequestsOnly: true,
  responseHandling: [
    { code: '204', swap: false },
    { code: '...', swap: true },
  ],
});

/** A whole page. */
export function page(title: string, body: Html): Html {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="htmx-config" content="${HTMX_CONFIG}">
<title>${title} · hermes</title>
<link rel="icon" type="image/svg+xml" href="${CONSOLE_PATH}/assets/favicon.svg">
<link rel="stylesheet" href="${CONSOLE_PATH}/assets/console.css">
<script src="${CONSOLE_PATH}/assets/htmx.min.js" defer></script>
<script src="${CONSOLE_PATH}/assets/sse.js" defer></script>
<script src="${CONSOLE_PATH}/assets/console.js" defer></script>
</head>
<body>
<header><nav><a href="${CONSOLE_PATH}" class="brand">hermes</a> <a href="${CONSOLE_PATH}">Overview</a> <a href="${CONSOLE_PATH}/cron/new">New cron job</a></nav></header>
<main>
${body}
</main>
</body>
</html>
`;
}

/** An error shown in place of what was asked for. */
export function errorBox(message: string): Html {
  return html`<p class="error" role="alert">${message}</p>`;
}

/** A warning: something that will not work as set, though nothing failed yet. */
export function warningBox(message: string): Html {
  return html`<p class="warning" role="status">${message}</p>`;
}
