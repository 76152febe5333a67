// The chat webview's HTML: one function used by the extension and by the browser tests. Strict CSP:
// scripts only with the nonce, styles/images/fonts only from the extension's own resources.
export function chatHtml(o: { cspSource: string; scriptUri: string; styleUri: string; nonce?: string }): string {
  const nonce = o.nonce ?? makeNonce();
  const csp = [
    "default-src 'none'",
    `style-src ${o.cspSource}`,
    `script-src 'nonce-${nonce}'`,
    `img-src ${o.cspSource} data:`,
    `font-src ${o.cspSource}`,
  ].join('; ');
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${o.styleUri}">
<title>dsh</title></head>
<body><div id="app"></div>
<script nonce="${nonce}" src="${o.scriptUri}"></script></body></html>`;
}

export function makeNonce(): string {
  const chars = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  let s = '';
  for (let i = 0; i < 32; i++) s += chars[Math.floor(Math.random() * chars.length)];
  return s;
}
