package io.tablecdc.bigquery;
