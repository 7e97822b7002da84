import { onPostgres } from '../../helpers/postgres-backend.js';

if (await onPostgres()) await import('../auth-failure-throttle.test.js');
