SET client_min_messages = warning;
-- The source table and the table job.toml writes. `orders` has REPLICA
-- IDENTITY FULL so that its updates and deletes carry the old row (its
-- customer and amount), which the running totals take back.
DROP TABLE IF EXISTS orders, customer_totals;
CREATE TABLE orders (
    id int PRIMARY KEY,
    customer text NOT NULL,
    amount numeric(10, 2) NOT NULL
);
ALTER TABLE orders REPLICA IDENTITY FULL;
CREATE TABLE customer_totals (
    customer text PRIMARY KEY,
    total numeric(12, 2) NOT NULL,
    orders bigint NOT NULL
);
-- The orders before the job starts: the snapshot reads them.
INSERT INTO orders
SELECT i, 'customer-' || (i % 7), (i % 50) + 0.25
FROM generate_series(1, 1000) i;
