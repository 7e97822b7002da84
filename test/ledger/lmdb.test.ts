import t from 'tap';
import { openLmdbStorage } from '../../src/ledger/lmdb.js';
import { ledgerSuite } from './fixtures/ledger-suite.js';
import { tempLedgerDir } from './fixtures/lmdb-helpers.js';

ledgerSuite(t, async (opts) => openLmdbStorage(tempLedgerDir(t), opts));
