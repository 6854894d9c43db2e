#!/bin/sh
# Runs once, when the postgres container starts on an empty data volume (docker-entrypoint-initdb.d).
# Creates the role the connectors use, the catalog database, and the demo source database "shop" with two
# tables in the publication the example Postgres flow replicates. The password comes from the environment
# (docker/.env) and reaches SQL as a psql variable, quoted by psql.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres -v pw="$TABLECDC_DB_PASSWORD" <<'SQL'
CREATE ROLE tablecdc LOGIN REPLICATION PASSWORD :'pw';
CREATE DATABASE tablecdc OWNER tablecdc;
CREATE DATABASE shop;
SQL
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname shop <<'SQL'
CREATE SCHEMA shop;
CREATE TABLE shop.customers (
    id bigint PRIMARY KEY,
    name text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE shop.orders (
    id bigint PRIMARY KEY,
    customer_id bigint NOT NULL REFERENCES shop.customers (id),
    amount numeric(12, 2) NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO shop.customers (id, name) VALUES (1, 'Ada'), (2, 'Grace');
INSERT INTO shop.orders (id, customer_id, amount) VALUES (1, 1, 12.50), (2, 2, 99.90);
GRANT USAGE ON SCHEMA shop TO tablecdc;
GRANT SELECT ON ALL TABLES IN SCHEMA shop TO tablecdc;
CREATE PUBLICATION tablecdc_shop FOR TABLE shop.orders, shop.customers;
SQL
