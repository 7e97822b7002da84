import { onPostgres } from '../../helpers/postgres-backend.js';

if (await onPostgres()) await import('../payments.test.js');
