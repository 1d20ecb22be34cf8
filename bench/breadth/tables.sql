-- A small retail star schema (after TPC-DS, a few columns per table) for the breadth
-- corpus: three sales channels, store returns, inventory snapshots and their dimensions,
-- each fed by `files` connectors (`bench/breadth_bench.py`).
CREATE TABLE date_dim (d_date_sk INT NOT NULL, d_date DATE, d_year INT, d_qoy INT, d_moy INT,
  d_dom INT, d_dow INT, d_week_seq INT, PRIMARY KEY (d_date_sk));
CREATE TABLE item (i_item_sk INT NOT NULL, i_item_id STRING, i_brand STRING, i_class STRING,
  i_category STRING, i_manufact_id INT, i_current_price DECIMAL(7,2), PRIMARY KEY (i_item_sk));
CREATE TABLE customer (c_customer_sk INT NOT NULL, c_customer_id STRING, c_first_name STRING,
  c_last_name STRING, c_birth_year INT, c_state STRING, c_preferred_flag STRING,
  PRIMARY KEY (c_customer_sk));
CREATE TABLE store (s_store_sk INT NOT NULL, s_store_name STRING, s_city STRING,
  s_state STRING, s_market_id INT, s_floor_space INT, PRIMARY KEY (s_store_sk));
CREATE TABLE warehouse (w_warehouse_sk INT NOT NULL, w_warehouse_name STRING, w_state STRING,
  w_sq_ft INT, PRIMARY KEY (w_warehouse_sk));
CREATE TABLE promotion (p_promo_sk INT NOT NULL, p_promo_name STRING, p_channel_email STRING,
  p_channel_tv STRING, p_cost DECIMAL(15,2), PRIMARY KEY (p_promo_sk));
CREATE TABLE store_sales (ss_item_sk INT NOT NULL, ss_ticket_number INT NOT NULL,
  ss_sold_date_sk INT, ss_customer_sk INT, ss_store_sk INT, ss_promo_sk INT, ss_quantity INT,
  ss_sales_price DECIMAL(7,2), ss_ext_sales_price DECIMAL(9,2), ss_net_profit DECIMAL(9,2),
  PRIMARY KEY (ss_item_sk, ss_ticket_number));
CREATE TABLE store_returns (sr_item_sk INT NOT NULL, sr_ticket_number INT NOT NULL,
  sr_returned_date_sk INT, sr_customer_sk INT, sr_store_sk INT, sr_return_quantity INT,
  sr_return_amt DECIMAL(9,2), sr_reason STRING, PRIMARY KEY (sr_item_sk, sr_ticket_number));
CREATE TABLE catalog_sales (cs_item_sk INT NOT NULL, cs_order_number INT NOT NULL,
  cs_sold_date_sk INT, cs_bill_customer_sk INT, cs_warehouse_sk INT, cs_promo_sk INT,
  cs_quantity INT, cs_sales_price DECIMAL(7,2), cs_ext_sales_price DECIMAL(9,2),
  cs_net_profit DECIMAL(9,2), PRIMARY KEY (cs_item_sk, cs_order_number));
CREATE TABLE web_sales (ws_item_sk INT NOT NULL, ws_order_number INT NOT NULL,
  ws_sold_date_sk INT, ws_bill_customer_sk INT, ws_warehouse_sk INT, ws_promo_sk INT,
  ws_quantity INT, ws_sales_price DECIMAL(7,2), ws_ext_sales_price DECIMAL(9,2),
  ws_net_profit DECIMAL(9,2), PRIMARY KEY (ws_item_sk, ws_order_number));
CREATE TABLE inventory (inv_date_sk INT NOT NULL, inv_item_sk INT NOT NULL,
  inv_warehouse_sk INT NOT NULL, inv_quantity_on_hand INT,
  PRIMARY KEY (inv_date_sk, inv_item_sk, inv_warehouse_sk));
