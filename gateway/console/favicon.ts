/**
 * The console's icon: a clock face drawn as SVG in code (no binary file, no emoji font), served as
 * `/favicon.ico` (server.ts) and `/ui/assets/favicon.svg`; the tick events' glyph is the same
 * drawing (console.css).
 */

/** The icon's SVG text. */
export const FAVICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><circle cx="16" cy="17" r="13" fill="#fff" stroke="#2b59c3" stroke-width="3"/><path d="M16 9v8l5 4" fill="none" stroke="#2b59c3" stroke-width="3" stroke-linecap="round"/></svg>`;

/** The icon's media type. */
export const FAVICON_TYPE = 'image/svg+xml';
