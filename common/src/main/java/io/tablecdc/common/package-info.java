package io.tablecdc.common;
