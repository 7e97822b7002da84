import { onPostgres } from '../../helpers/postgres-backend.js';

if (await onPostgres()) await import('../client-envelope-ids.test.js');
