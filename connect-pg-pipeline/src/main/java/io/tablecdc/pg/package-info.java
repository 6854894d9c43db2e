package io.tablecdc.pg;
