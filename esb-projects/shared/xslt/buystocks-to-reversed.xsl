<?xml version="1.0" encoding="UTF-8"?>
<!-- /transform/xslt, request leg: a buyStocks document becomes its "reversed" form, every
     element name of the order list spelt backwards (buyStocks -> skcotSyub, order -> redro,
     symbol -> lobmys, buyerID -> DIreyub, price -> ecirp, volume -> emulov). Everything else
     (envelope, header, values, order of the orders) is copied unchanged, so the stylesheet
     works on a whole SOAP envelope (Camel) or on the body's payload element (Synapse).
     reversed-to-buystocks.xsl is its inverse. -->
<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform"
                xmlns:m="http://services.samples/xsd">
  <xsl:template match="@*|node()">
    <xsl:copy><xsl:apply-templates select="@*|node()"/></xsl:copy>
  </xsl:template>
  <xsl:template match="m:buyStocks">
    <m:skcotSyub><xsl:apply-templates select="@*|node()"/></m:skcotSyub>
  </xsl:template>
  <xsl:template match="m:buyStocks/order"><redro><xsl:apply-templates select="@*|node()"/></redro></xsl:template>
  <xsl:template match="m:buyStocks/order/symbol"><lobmys><xsl:apply-templates select="@*|node()"/></lobmys></xsl:template>
  <xsl:template match="m:buyStocks/order/buyerID"><DIreyub><xsl:apply-templates select="@*|node()"/></DIreyub></xsl:template>
  <xsl:template match="m:buyStocks/order/price"><ecirp><xsl:apply-templates select="@*|node()"/></ecirp></xsl:template>
  <xsl:template match="m:buyStocks/order/volume"><emulov><xsl:apply-templates select="@*|node()"/></emulov></xsl:template>
</xsl:stylesheet>
