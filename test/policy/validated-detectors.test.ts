// Detectors that validate what they match (issue 12 follow-up, issue 13): structure alone never fires.
// Positives are well-known test values (card networks' test numbers, the IBAN registry's examples);
// negatives are the look-alikes support traffic is full of.
import t from 'tap';
import { DETECTORS } from '../../src/policy/detectors.js';
import { isCardNumber, isIban, luhn } from '../../src/policy/validated-detectors.js';

const fires = (detector: string, text: string) => DETECTORS.get(detector)!.find(text) !== -1;

t.test('credit_card: Luhn, issuer prefix and length', async (t) => {
  for (const card of ['4111 1111 1111 1111', '4012888888881881', '5555-5555-5555-4444', '2223003122003222', '378282246310005', '6011111111111117', '3530111333300000', '30569309025904']) {
    t.ok(fires('credit_card', `please charge ${card} today`), `fires on ${card}`);
  }
  for (const text of [
    'order 4111111111111112 shipped', // fails Luhn
    'tracking 1Z999AA10123456784',
    'order number 1234567890123456', // no issuer starts with 1
    'SKU 9999999999999995',
    'phone +1 415 555 2671',
    'invoice 2024112400001234',
    'call 0000 0000 0000 0000',
    'Order number 4532015112830366 is on its way', // Luhn-valid, but labelled as an order
    '{"tracking_number": "4532015112830366"}',
    'Invoice 4532015112830366 is due',
    'Amazon order 113-4532015-1128303 was refunded', // 3-7-7 is not a card grouping
    'EAN 4006381333931',
    'IMEI: 353456789012348',
    'Container 4532015112830366 cleared customs',
  ]) {
    t.notOk(fires('credit_card', text), `silent on: ${text}`);
  }
  t.ok(fires('credit_card', 'Amex 3782 822463 10005 was declined'), 'Amex 4-6-5 grouping');
  t.ok(fires('credit_card', '378282246310005 04/26'), 'a card followed by its expiry');
  t.ok(fires('credit_card', '4111 1111 1111 1111 04/26'), 'a grouped card followed by its expiry');
  t.ok(luhn('79927398713'));
  t.notOk(isCardNumber('4111 1111 1111 111'), 'a Visa number of 15 digits is not a card');
});

t.test('iban: country length and mod-97', async (t) => {
  for (const iban of ['GB82 WEST 1234 5698 7654 32', 'DE89370400440532013000', 'FR1420041010050500013M02606', 'NL91ABNA0417164300']) {
    t.ok(fires('iban', `pay to ${iban} please`), `fires on ${iban}`);
  }
  t.ok(fires('iban', 'pay to BE68 5390 0754 7034 from my account'), 'an IBAN followed by words');
  t.notOk(isIban('GB82WEST12345698765433'), 'a wrong check digit');
  t.notOk(fires('iban', 'reference DE12345678901234567890'), 'a reference shaped like an IBAN');
  t.notOk(fires('iban', 'ticket AB12CDEFGHIJKLMNOP'), 'no such country');
});

t.test('phone: libphonenumber-js metadata, in context or formatted', async (t) => {
  for (const text of [
    'call me at +44 20 7946 0958',
    'my cell is (415) 555-2671',
    'reach us on +1-212-555-0147',
    'Please call 212.648.2290 to confirm',
    'phone: 4156482290', // bare digits with a phone word
    'Mon numéro de téléphone : 06 12 34 56 78', // national form of another region, with a phone word
    'Meine Handynummer ist 0151 23456789.',
    'meu celular é (11) 91234-5678',
  ]) t.ok(fires('phone', text), `fires on: ${text}`);
  for (const text of [
    'order 1234 shipped on 2024-11-24',
    'version 1.2.3.4',
    'price $1,299.00',
    'tracking 123456',
    'order #00012345',
    'Order 4156482290 was cancelled', // a valid US number in shape, labelled as an order
    'Unix time 2024112401', // bare digits, no phone word: an id or a timestamp
    'Reference 415-648-2290 has been added to your case',
    'Booking code 415 648 2290 confirmed',
    'TELEGRAM_BOT_TOKEN=7692605736:AAkgOoEpwZETN3XbNm0PzyI2rP1lZxjzzmJ',
    'El número de Seguro Social registrado es 502456485.',
    'Your server is at 203.57.233.22',
  ]) t.notOk(fires('phone', text), `silent on: ${text}`);
});

t.test('ip_address: only what parses', async (t) => {
  for (const text of ['from 192.168.1.20 at noon', 'host 2001:db8::8a2e:370:7334 down', 'ip=10.0.0.1']) t.ok(fires('ip_address', text), `fires on: ${text}`);
  for (const text of ['server 203.57.233.22.', 'db at 10.0.3.7:3306', 'fe80::1ff:fe23:4567:890a', 'From 81.23.144.7 at 10:02', 'Add 2001:db8:85a3::8a2e to the allow-list']) t.ok(fires('ip_address', text), `fires on: ${text}`);
  for (const text of [
    'version 1.2.3',
    'build 999.1.1.1',
    'item 1.02.3.4',
    'time 12:30:45',
    'ratio 3:2',
    'Version 1.2.3.4 of the plugin',
    'Firmware 2.4.1.8 fixes it',
    'See section 4.2.1.3',
    'subnet mask 255.255.255.0',
    'bind to 0.0.0.0',
    'open 127.0.0.1:8080',
    'OID 1.3.6.1.4.1.311',
    'mac=00:1A:2B:3C:4D:5E',
    'use std::vector and Foo :: Bar',
    'listen on [::1]:80',
    'Terraform 1.7.4.2 and Kubernetes 1.29.2.1 are supported', // a product's version, not a host
  ]) t.notOk(fires('ip_address', text), `silent on: ${text}`);
});

t.test('jwt: a header that decodes to JSON naming its algorithm', async (t) => {
  const jwt = 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U';
  t.ok(fires('jwt', `token: ${jwt}`));
  t.notOk(fires('jwt', 'eyJustkidding.notatoken.really'), 'a look-alike whose header is not JSON');
});
