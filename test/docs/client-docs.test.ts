import t from 'tap';
import { readFileSync } from 'node:fs';

const read = (rel: string) => readFileSync(new URL(`../../${rel}`, import.meta.url), 'utf8');

t.test('docs/client.md names every environment setting the client reads, and every option it takes', async (t) => {
  const doc = read('docs/client.md');
  const source = read('src/client/client-settings.ts');
  const envNames = [...source.matchAll(/get\('(GOV_[A-Z_]+)'\)/g)].map((m) => m[1]);
  t.ok(envNames.length >= 5, `found the settings read (${envNames.join(', ')})`);
  for (const name of new Set(envNames)) t.match(doc, `\`${name}\``, `${name} is documented`);
  const options = source.slice(source.indexOf('export interface GovClientOptions'), source.indexOf('export interface ClientSettings'));
  for (const [, name] of options.matchAll(/^\s{2}(\w+)\?:/gm)) t.match(doc, `| \`${name}\` |`, `option ${name} is in the settings table`);
});

t.test('the README shows govern() imported from gov-gateway/client and links docs/client.md', async (t) => {
  const readme = read('README.md');
  t.match(readme, "import { govern } from 'gov-gateway/client';");
  t.match(readme, '(docs/client.md)');
});
