package io.tablecdc.catalog;
