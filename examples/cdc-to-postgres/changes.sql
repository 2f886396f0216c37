-- Changes while the job runs: the stream reads them, in commit order.
BEGIN;
INSERT INTO orders VALUES (1001, 'ada', 12.50), (1002, 'ada', 7.25), (1003, 'grace', 3.00);
COMMIT;
-- An order moves to another customer: taken back from one, added to the other.
UPDATE orders SET customer = 'grace' WHERE id = 1002;
UPDATE orders SET amount = amount * 2 WHERE customer = 'customer-3';
-- Every order of customer-5 goes: the customer leaves customer_totals.
DELETE FROM orders WHERE customer = 'customer-5';
