-- How a Postgres pipeline table belongs to its publication: the relation and the publication entry that list it
-- (pg_publication_rel or pg_publication_namespace). A table that left the publication and came back, or that was
-- dropped and created again, belongs by another entry, and is copied again instead of streaming over the gap.
ALTER TABLE cdc_table_replication_state
    ADD COLUMN publication_member text;
