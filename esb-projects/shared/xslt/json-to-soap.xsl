<?xml version="1.0" encoding="UTF-8"?>
<!-- /transform/json, request leg (XSLT 3.0, Saxon-HE): the client's JSON object
     {"id": 2, "message": "hi"} becomes the thesis echoMessage call. The JSON text comes either
     as the parameter jsonRequest (Camel: a placeholder envelope whose body holds one empty
     element) or as the text of the payload element (Synapse: <ns:text> from its plain-text
     builder). Whichever element stands for the payload is replaced by ws:echoMessage; the rest
     is copied. Values are written as text nodes, so any character survives the trip. -->
<xsl:stylesheet version="3.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform"
                xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"
                xmlns:ws="http://ws.webservice.korsdrag.datanizze.se/"
                exclude-result-prefixes="#all">
  <xsl:param name="jsonRequest" select="()"/>
  <xsl:template match="@*|node()">
    <xsl:copy><xsl:apply-templates select="@*|node()"/></xsl:copy>
  </xsl:template>
  <xsl:template match="/*[not(self::soapenv:Envelope)] | soapenv:Body/*">
    <xsl:variable name="request" select="parse-json(if (exists($jsonRequest)) then string($jsonRequest) else string(.))"/>
    <ws:echoMessage>
      <id><xsl:value-of select="$request?id"/></id>
      <message><xsl:value-of select="$request?message"/></message>
    </ws:echoMessage>
  </xsl:template>
</xsl:stylesheet>
