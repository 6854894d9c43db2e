package io.tablecdc.clickhouse;
