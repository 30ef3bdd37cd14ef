-- Fixture for the driver matrix, loaded as root before every driver run
-- (test/drivers/run.sh), so the direct and the keyshard run start alike.
SET NAMES utf8mb4;
CREATE DATABASE IF NOT EXISTS ks_compat;
USE ks_compat;
DROP TABLE IF EXISTS t_types, t_rows, t_prep, t_bulk, t_txn, t_multi;
-- The ORM cases' table: sharded by keyshard for user orm (4 sub-tables),
-- a plain table directly; each side creates it.
DROP TABLE IF EXISTS orm_items, orm_items_0000, orm_items_0001, orm_items_0002, orm_items_0003;
CREATE TABLE t_types (
  id INT PRIMARY KEY, i INT, big BIGINT UNSIGNED, d DECIMAL(10,2), f DOUBLE,
  s VARCHAR(20), dt DATETIME, n INT NULL, j JSON, b VARBINARY(8)
) DEFAULT CHARSET = utf8mb4;
INSERT INTO t_types VALUES
  (1, -7, 18446744073709551615, 12.50, 1.5, 'héllo', '2024-02-29 13:14:15', NULL, '{"a": [1, 2]}', x'00ff'),
  (2, 42, 0, -0.01, -2.25e10, '', '1999-12-31 23:59:59', 7, '[]', NULL);
-- One table per writing case, so that a case failing on one side does not
-- shift the auto-increment ids another case reports.
CREATE TABLE t_rows (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20)) DEFAULT CHARSET = utf8mb4;
CREATE TABLE t_prep LIKE t_rows;
CREATE TABLE t_bulk LIKE t_rows;
CREATE TABLE t_txn LIKE t_rows;
CREATE TABLE t_multi LIKE t_rows;
DELIMITER //
CREATE OR REPLACE PROCEDURE p_compat(IN a INT, OUT b INT)
BEGIN
  SELECT a * 2 AS doubled, 'x' AS s;
  SET b = a + 1;
END//
DELIMITER ;
CREATE USER IF NOT EXISTS 'ks2'@'127.0.0.1' IDENTIFIED BY 'ks2';
CREATE USER IF NOT EXISTS 'ks2'@'localhost' IDENTIFIED BY 'ks2';
GRANT ALL PRIVILEGES ON ks_compat.* TO 'ks2'@'127.0.0.1';
GRANT ALL PRIVILEGES ON ks_compat.* TO 'ks2'@'localhost';
CREATE USER IF NOT EXISTS 'orm'@'127.0.0.1' IDENTIFIED BY 'orm';
CREATE USER IF NOT EXISTS 'orm'@'localhost' IDENTIFIED BY 'orm';
GRANT ALL PRIVILEGES ON ks_compat.* TO 'orm'@'127.0.0.1';
GRANT ALL PRIVILEGES ON ks_compat.* TO 'orm'@'localhost';
