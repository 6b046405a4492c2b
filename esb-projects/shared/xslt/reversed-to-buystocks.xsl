<?xml version="1.0" encoding="UTF-8"?>
<!-- /transform/xslt, response leg: the inverse of buystocks-to-reversed.xsl. The echoed
     "reversed" document becomes a buyStocks document again, orders and values unchanged. -->
<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform"
                xmlns:m="http://services.samples/xsd">
  <xsl:template match="@*|node()">
    <xsl:copy><xsl:apply-templates select="@*|node()"/></xsl:copy>
  </xsl:template>
  <xsl:template match="m:skcotSyub">
    <m:buyStocks><xsl:apply-templates select="@*|node()"/></m:buyStocks>
  </xsl:template>
  <xsl:template match="m:skcotSyub/redro"><order><xsl:apply-templates select="@*|node()"/></order></xsl:template>
  <xsl:template match="m:skcotSyub/redro/lobmys"><symbol><xsl:apply-templates select="@*|node()"/></symbol></xsl:template>
  <xsl:template match="m:skcotSyub/redro/DIreyub"><buyerID><xsl:apply-templates select="@*|node()"/></buyerID></xsl:template>
  <xsl:template match="m:skcotSyub/redro/ecirp"><price><xsl:apply-templates select="@*|node()"/></price></xsl:template>
  <xsl:template match="m:skcotSyub/redro/emulov"><volume><xsl:apply-templates select="@*|node()"/></volume></xsl:template>
</xsl:stylesheet>
