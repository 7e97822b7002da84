import t from 'tap';
import { escapeBeyondLatin1 } from '../../src/build/latin1-source.js';

// Each case is an expression; escaped or not, it must evaluate to the same value, and the escaped text
// must hold no character above U+00FF.
const cases: Array<[string, string]> = [
  ['string with arrows and CJK', `'v1 → v2 电话 café'`],
  ['regex, no flag, BMP characters', `/^(?:tél|телефон|電話)$/.test('телефон') + ',' + /[→-]/.test('→')`],
  ['regex, u flag, property escapes around them', `/(?<![\\p{L}])(?:rückruf|телефон)(?![\\p{L}])/u.test('x телефон y')`],
  ['regex, u flag, astral character in a class', `/^[😀a]$/u.test('😀') + ',' + /^[😀a]$/u.test('\\ud83d')`],
  ['regex without u: an astral character is two code units', `/^😀$/.test('😀') + ',' + '😀'.length`],
  ['identity escape of a non-Latin-1 character', `/\\Ж/.test('Ж') + ',' + '\\Ж'`],
  ['escaped backslash before one', `'\\\\Ж'.length + ',' + /\\\\Ж/.test('\\\\Ж')`],
  ['template literal', '`→${1 + 1}←`'],
  ['Latin-1 stays as written', `'º°à§'`],
];

for (const [name, expr] of cases) {
  t.test(name, async (t) => {
    const escaped = escapeBeyondLatin1(expr);
    t.notMatch(escaped, /[\u0100-\uffff]/, 'nothing above U+00FF is left');
    t.same((0, eval)(escaped), (0, eval)(expr), 'the same value');
  });
}

t.test('Latin-1 text is left alone', async (t) => {
  const text = `const s = 'naïve º'; const r = /n[º°o]\\./;`;
  t.equal(escapeBeyondLatin1(text), text);
});
